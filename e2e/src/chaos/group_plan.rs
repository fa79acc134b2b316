//! Which claims each VolumeGroupSnapshot of the group phase takes: groups of 3 to 5 Bound claims, each group picked
//! by a label value of its own, so a selector matches exactly the claims the run expects as members.

/// Smallest and largest group the phase asks for (fewer when fewer claims are Bound).
const SMALLEST: usize = 3;
const LARGEST: usize = 5;

/// One VolumeGroupSnapshot to create: its name, the label that selects its claims, and those claims.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPlan {
    pub name: String,
    pub label_key: String,
    pub label_value: String,
    pub claims: Vec<String>,
}

/// `count` groups over `claims`, taken in order. Sizes go 3, 4, 5, 3, … When the claims run out the next group
/// starts again from the first claim under a new label key (`chaos-group-<round>`), so a claim carries one label
/// per round and no group spans two rounds: every group's claims share one key.
pub fn plan_groups(claims: &[String], count: usize) -> Vec<GroupPlan> {
    if claims.is_empty() {
        return Vec::new();
    }
    let mut plans = Vec::with_capacity(count);
    let (mut round, mut next) = (0usize, 0usize);
    for index in 0..count {
        let size = (SMALLEST + index % (LARGEST - SMALLEST + 1)).min(claims.len());
        if next + size > claims.len() {
            round += 1;
            next = 0;
        }
        let name = format!("g-{index:04}");
        plans.push(GroupPlan {
            label_key: format!("chaos-group-{round}"),
            label_value: name.clone(),
            name,
            claims: claims[next..next + size].to_vec(),
        });
        next += size;
    }
    plans
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn claims(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c-{i:04}")).collect()
    }

    #[test]
    fn sizes_go_three_to_five() {
        let rows: &[(usize, usize, &[usize])] =
            &[(240, 5, &[3, 4, 5, 3, 4]), (2, 3, &[2, 2, 2]), (4, 3, &[3, 4, 4]), (240, 0, &[]), (0, 4, &[])];
        for (n, count, want) in rows {
            let sizes: Vec<usize> = plan_groups(&claims(*n), *count).iter().map(|p| p.claims.len()).collect();
            assert_eq!(sizes, *want, "{count} groups of {n} claims");
        }
    }

    #[test]
    fn each_group_is_selected_by_a_label_of_its_own() {
        let plans = plan_groups(&claims(10), 6);
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["g-0000", "g-0001", "g-0002", "g-0003", "g-0004", "g-0005"]);
        // The labels every claim ends up with; a selector key=value must match exactly the group's claims.
        let mut labels: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
        for plan in &plans {
            for claim in &plan.claims {
                let previous = labels.entry(claim).or_default().insert(&plan.label_key, &plan.label_value);
                assert_eq!(previous, None, "{claim} is labelled twice under {}", plan.label_key);
            }
        }
        for plan in &plans {
            let selected: BTreeSet<&str> = labels
                .iter()
                .filter(|(_, l)| l.get(plan.label_key.as_str()) == Some(&plan.label_value.as_str()))
                .map(|(c, _)| *c)
                .collect();
            let want: BTreeSet<&str> = plan.claims.iter().map(String::as_str).collect();
            assert_eq!(selected, want, "{}", plan.name);
        }
    }

    #[test]
    fn a_group_never_spans_two_rounds() {
        // 10 claims: 3 + 4 fit, the third group (5) would run past the end and starts a new round.
        let plans = plan_groups(&claims(10), 4);
        let rows: Vec<(&str, &str, &str)> = plans
            .iter()
            .map(|p| (p.label_key.as_str(), p.claims[0].as_str(), p.claims.last().unwrap().as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                ("chaos-group-0", "c-0000", "c-0002"),
                ("chaos-group-0", "c-0003", "c-0006"),
                ("chaos-group-1", "c-0000", "c-0004"),
                ("chaos-group-1", "c-0005", "c-0007"),
            ]
        );
    }
}
