//! The five chat roles and the per-role position index over the visible messages.

use crate::core::cow_vec::CowVec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    System = 0,
    Developer = 1,
    User = 2,
    Assistant = 3,
    Tool = 4,
}

impl Role {
    pub const ALL: [Role; 5] = [Role::System, Role::Developer, Role::User, Role::Assistant, Role::Tool];

    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// System and developer messages are the instructions CLEAR keeps.
    pub fn is_instruction(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// For each role, the ascending positions (in the visible list) of the messages of that role.
/// Copy-on-write vectors: cloning is O(1) and shares chunks, so batch snapshots carry it for free.
#[derive(Clone, Default, Debug)]
pub struct RoleIndex {
    positions: [CowVec<u32>; 5],
}

impl RoleIndex {
    /// Built from the roles of the visible messages, in order. O(n), in two passes over `roles`:
    /// one to count each role, one to fill vectors of that exact size, which become the index's
    /// vectors uncopied (growing them by doubling made most of a batch record's reallocations).
    pub fn from_roles(roles: impl Iterator<Item = Role> + Clone) -> Self {
        let mut counts = [0usize; 5];
        for role in roles.clone() {
            counts[role as usize] += 1;
        }
        let mut positions: [Vec<u32>; 5] = counts.map(Vec::with_capacity);
        for (pos, role) in roles.enumerate() {
            positions[role as usize].push(pos as u32);
        }
        Self {
            positions: positions.map(CowVec::from_vec),
        }
    }

    pub fn of(&self, role: Role) -> &CowVec<u32> {
        &self.positions[role as usize]
    }

    /// Record a message of `role` appended at `pos` (greater than every recorded position).
    pub fn push(&mut self, role: Role, pos: u32) {
        self.positions[role as usize].push_back(pos);
    }

    /// The message at `pos` changed role. O(n) (the two roles' vectors are rebuilt; replacing a
    /// message by one of the same role, the common case, is O(1)).
    pub fn move_position(&mut self, pos: u32, from: Role, to: Role) {
        if from == to {
            return;
        }
        let old = &mut self.positions[from as usize];
        if let Ok(i) = old.binary_search(&pos) {
            old.remove(i);
        }
        let new = &mut self.positions[to as usize];
        let i = new.binary_search(&pos).unwrap_or_else(|i| i);
        new.insert(i, pos);
    }

    /// The last `n` positions among `roles`, ascending. O(n * roles).
    pub fn last_of(&self, roles: &[Role], n: usize) -> Vec<u32> {
        if let [role] = roles {
            let v = self.of(*role);
            return v.range(v.len().saturating_sub(n)..v.len()).collect();
        }
        // Merge the tails of several roles from the back.
        let mut cursors: Vec<usize> = roles.iter().map(|r| self.of(*r).len()).collect();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let mut best: Option<(usize, u32)> = None;
            for (k, role) in roles.iter().enumerate() {
                if cursors[k] > 0 {
                    let p = self.of(*role)[cursors[k] - 1];
                    if best.is_none_or(|(_, b)| p > b) {
                        best = Some((k, p));
                    }
                }
            }
            let Some((k, p)) = best else { break };
            cursors[k] -= 1;
            out.push(p);
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_role_and_nothing_else() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("System"), None);
        assert_eq!(Role::parse("function"), None);
    }

    #[test]
    fn index_tracks_positions_and_merges_tails() {
        use Role::*;
        let mut idx = RoleIndex::from_roles([System, User, Assistant, Tool, User, Assistant].into_iter());
        assert_eq!(idx.of(User).iter().copied().collect::<Vec<_>>(), [1, 4]);
        assert_eq!(idx.last_of(&[User], 1), [4]);
        assert_eq!(idx.last_of(&[User, Tool], 3), [1, 3, 4]);
        assert_eq!(idx.last_of(&[System], 10), [0]);
        idx.move_position(4, User, Tool);
        assert_eq!(idx.of(Tool).iter().copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(idx.of(User).iter().copied().collect::<Vec<_>>(), [1]);
        idx.push(User, 6);
        assert_eq!(idx.last_of(&[User, Tool, Assistant], 2), [5, 6]);
    }
}
