//! Connected components of the duplicate graph: union-find over document positions (one u32
//! parent each), where the root of a component is always its smallest position, i.e. its
//! first document in source order: the survivor.

/// Union-find whose roots are the minimum of their component.
pub struct Components {
    parent: Vec<u32>,
}

impl Components {
    pub fn new(n: u32) -> Components {
        Components { parent: (0..n).collect() }
    }

    /// The root (smallest member) of `x`'s component, halving the path on the way.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            let gp = self.parent[p as usize];
            self.parent[x as usize] = gp;
            x = gp;
        }
        x
    }

    /// Join the components of `a` and `b`; the smaller root becomes the root.
    pub fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[hi as usize] = lo;
        }
    }

    /// `(document, root)` for every document in a component of two or more, by document.
    pub fn groups(mut self) -> Vec<(u32, u32)> {
        let n = self.parent.len() as u32;
        let mut size = std::collections::HashMap::<u32, u32>::new();
        let mut out = Vec::new();
        for x in 0..n {
            let r = self.find(x);
            if r != x {
                out.push((x, r));
                *size.entry(r).or_insert(1) += 1;
            }
        }
        // Roots belong to their groups too.
        out.extend(size.keys().map(|&r| (r, r)));
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_smallest_member_whatever_the_union_order() {
        let edges = [(5u32, 7u32), (7, 2), (9, 3), (3, 8), (2, 6)];
        for rev in [false, true] {
            let mut c = Components::new(10);
            let mut e = edges.to_vec();
            if rev {
                e.reverse();
            }
            for (a, b) in e {
                c.union(a, b);
            }
            let g = c.groups();
            assert_eq!(g, vec![(2, 2), (3, 3), (5, 2), (6, 2), (7, 2), (8, 3), (9, 3)]);
        }
    }
}
