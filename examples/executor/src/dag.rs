//! Dependency order of a DAG (`schemas/dag.schema.json`): Kahn's algorithm, ties broken by
//! the order nodes are listed in.

use std::collections::HashMap;

/// Node ids in an order where every node comes after the nodes it depends on.
///
/// # Errors
/// A message naming the problem: no `nodes`, a node without `id`, an unknown dependency, or
/// a cycle (kairos validates DAGs on deploy, so this guards hand-made messages only).
pub fn dependency_order(dag: &serde_json::Value) -> Result<Vec<String>, String> {
    let nodes = dag["nodes"].as_array().ok_or("dag has no nodes array")?;
    let mut ids = Vec::with_capacity(nodes.len());
    for node in nodes {
        ids.push(
            node["id"]
                .as_str()
                .ok_or("a node has no string id")?
                .to_string(),
        );
    }
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut waiting_on = vec![0usize; ids.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (i, node) in nodes.iter().enumerate() {
        for dependency in node["depends_on"].as_array().into_iter().flatten() {
            let name = dependency.as_str().unwrap_or_default();
            let &j = index
                .get(name)
                .ok_or_else(|| format!("node {} depends on unknown node {name}", ids[i]))?;
            waiting_on[i] += 1;
            dependents[j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..ids.len()).filter(|i| waiting_on[*i] == 0).collect();
    let mut order = Vec::with_capacity(ids.len());
    while let Some(next) = ready.iter().copied().min() {
        ready.retain(|i| *i != next);
        order.push(ids[next].clone());
        for &dependent in &dependents[next] {
            waiting_on[dependent] -= 1;
            if waiting_on[dependent] == 0 {
                ready.push(dependent);
            }
        }
    }
    if order.len() < ids.len() {
        return Err("dag has a cycle".into());
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dependencies_come_first_and_ties_keep_listing_order() {
        let dag = json!({"nodes": [
            {"id": "load", "depends_on": ["transform"]},
            {"id": "extract"},
            {"id": "transform", "depends_on": ["extract"]},
            {"id": "audit"}
        ]});
        assert_eq!(
            dependency_order(&dag).expect("a DAG"),
            ["extract", "transform", "load", "audit"]
        );
    }

    #[test]
    fn cycles_and_unknown_nodes_are_errors() {
        let cycle =
            json!({"nodes": [{"id": "a", "depends_on": ["b"]}, {"id": "b", "depends_on": ["a"]}]});
        assert!(dependency_order(&cycle).is_err());
        let unknown = json!({"nodes": [{"id": "a", "depends_on": ["zz"]}]});
        assert!(dependency_order(&unknown)
            .expect_err("unknown")
            .contains("zz"));
    }
}
