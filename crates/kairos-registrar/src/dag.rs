//! Workflow DAG validation (`schemas/dag.schema.json`) and the canonical topological order.
//!
//! A DAG is `{"nodes": [{"id", "action"?, "depends_on"?: [ids], ...}, ...]}`. The JSON Schema
//! covers the shape; this module also enforces what a schema cannot: unique ids, known
//! references, no self-dependency, no cycle. Every error names the offending node (for a
//! cycle, the nodes on it) so a deploy fails with a message the author can act on.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use serde_json::Value;

/// Most nodes one DAG may have (the schema's `maxItems`).
pub const MAX_NODES: usize = 10_000;

/// Longest node id, in characters (the schema's `maxLength`).
pub const MAX_NODE_ID_LEN: usize = 200;

/// The rule a value with a NUL character breaks, for a [`crate::Problem`] naming the field.
pub const NUL_RULE: &str = "must not contain NUL characters (\\u0000)";

/// Whether a string or an object key anywhere in `value` contains NUL (U+0000).
///
/// PostgreSQL refuses NUL in `text` and `jsonb`, so such a value would fail at the insert
/// (an internal error) instead of being refused as input.
pub fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.contains('\0') || contains_nul(value)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// The length of `value` as compact JSON, the form a launch message carries it in,
/// counted without building the text.
pub fn json_len(value: &Value) -> usize {
    let mut counter = ByteCounter(0);
    // Invariant: a `Value` always serializes, and the counter never fails to write.
    serde_json::to_writer(&mut counter, value).expect("a JSON value serializes");
    counter.0
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a DAG was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DagError {
    /// A value of the wrong JSON type or shape, at a JSON path such as `nodes[2].depends_on`.
    #[error("dag.{path} {rule}")]
    Shape {
        /// Where, relative to the DAG (`nodes`, `nodes[3].id`).
        path: String,
        /// What it must be (`must be an array of objects`).
        rule: &'static str,
    },
    /// `nodes` is empty.
    #[error("dag.nodes must contain at least one node")]
    Empty,
    /// More than [`MAX_NODES`] nodes.
    #[error("dag.nodes has {count} nodes; the limit is 10000")]
    TooManyNodes {
        /// How many there are.
        count: usize,
    },
    /// Two nodes share an id.
    #[error("dag.nodes[{index}].id {id:?} repeats the id of dag.nodes[{first}]")]
    DuplicateId {
        /// The repeated id.
        id: String,
        /// Position of the first node with it.
        first: usize,
        /// Position of the repeat.
        index: usize,
    },
    /// A `depends_on` entry names no node of the DAG.
    #[error("node {node:?} depends on {missing:?}, which is not a node of this dag")]
    UnknownDependency {
        /// The node whose `depends_on` is wrong.
        node: String,
        /// The id it names.
        missing: String,
    },
    /// A node lists itself in `depends_on`.
    #[error("node {node:?} depends on itself")]
    SelfDependency {
        /// The node.
        node: String,
    },
    /// A node lists the same dependency twice.
    #[error("node {node:?} lists {dependency:?} twice in depends_on")]
    DuplicateDependency {
        /// The node.
        node: String,
        /// The repeated dependency.
        dependency: String,
    },
    /// The dependencies form a cycle; `nodes` are on it, each depending on the next and the
    /// last on the first.
    #[error("depends_on forms a cycle: {}", cycle_text(.nodes))]
    Cycle {
        /// The nodes on one cycle, in dependency order.
        nodes: Vec<String>,
    },
}

fn cycle_text(nodes: &[String]) -> String {
    let mut text = nodes.join(" -> ");
    if let Some(first) = nodes.first() {
        text.push_str(" -> ");
        text.push_str(first);
    }
    text.push_str(" (each node depends on the next)");
    text
}

/// One node of a validated DAG; the fields kairos reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique id within the DAG.
    pub id: String,
    /// What the executor runs, if given (opaque to kairos).
    pub action: Option<String>,
    /// Ids of the nodes that must succeed first; all exist, none repeated, not the node itself.
    pub depends_on: Vec<String>,
}

/// A validated, acyclic workflow DAG. Built only by [`validate_dag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dag {
    nodes: Vec<Node>,
    // Invariant: a permutation of `0..nodes.len()` in which every node comes after all of
    // its dependencies; computed once by `validate_dag`.
    order: Vec<usize>,
}

impl Dag {
    /// The nodes, in the order the document lists them.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node with `id`, if any.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// Node ids in the canonical topological order: repeatedly take, among the nodes whose
    /// dependencies have all been taken, the one listed first in `nodes` (Kahn's algorithm,
    /// ties broken by document position). Executors that need one fixed order use this rule.
    pub fn topological_order(&self) -> Vec<&str> {
        self.order
            .iter()
            .map(|&index| self.nodes[index].id.as_str())
            .collect()
    }
}

/// Validates a DAG document and returns it with its topological order.
///
/// # Errors
/// [`DagError`] naming the JSON path or the node: wrong shape, empty or oversized `nodes`,
/// duplicate id, unknown / self / repeated dependency, or a cycle (with the nodes on it).
pub fn validate_dag(dag: &Value) -> Result<Dag, DagError> {
    let nodes = parse_nodes(dag)?;
    let index_of = index_ids(&nodes)?;
    let depends_on = resolve_dependencies(&nodes, &index_of)?;
    let order = kahn_order(&depends_on);
    if order.len() < nodes.len() {
        return Err(DagError::Cycle {
            nodes: find_cycle(&nodes, &depends_on, &order),
        });
    }
    Ok(Dag { nodes, order })
}

fn shape(path: impl Into<String>, rule: &'static str) -> DagError {
    DagError::Shape {
        path: path.into(),
        rule,
    }
}

fn parse_nodes(dag: &Value) -> Result<Vec<Node>, DagError> {
    let object = dag
        .as_object()
        .ok_or_else(|| shape("", "must be a JSON object"))?;
    let Some(nodes) = object.get("nodes") else {
        return Err(shape("nodes", "is required"));
    };
    let nodes = nodes
        .as_array()
        .ok_or_else(|| shape("nodes", "must be an array"))?;
    if nodes.is_empty() {
        return Err(DagError::Empty);
    }
    if nodes.len() > MAX_NODES {
        return Err(DagError::TooManyNodes { count: nodes.len() });
    }
    nodes
        .iter()
        .enumerate()
        .map(|(index, node)| parse_node(index, node))
        .collect()
}

fn parse_node(index: usize, node: &Value) -> Result<Node, DagError> {
    let path = format!("nodes[{index}]");
    let object = node
        .as_object()
        .ok_or_else(|| shape(path.clone(), "must be an object"))?;
    let id = match object.get("id") {
        None => return Err(shape(format!("{path}.id"), "is required")),
        Some(id) => node_id(id, format!("{path}.id"))?,
    };
    let action = match object.get("action") {
        None => None,
        Some(Value::String(action)) => Some(action.clone()),
        Some(_) => return Err(shape(format!("{path}.action"), "must be a string")),
    };
    let depends_on = match object.get("depends_on") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(item, value)| node_id(value, format!("{path}.depends_on[{item}]")))
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(shape(
                format!("{path}.depends_on"),
                "must be an array of node ids",
            ))
        }
    };
    Ok(Node {
        id,
        action,
        depends_on,
    })
}

fn node_id(value: &Value, path: String) -> Result<String, DagError> {
    match value {
        Value::String(id) if !id.is_empty() && id.chars().count() <= MAX_NODE_ID_LEN => {
            Ok(id.clone())
        }
        Value::String(_) => Err(shape(path, "must be 1 to 200 characters long")),
        _ => Err(shape(path, "must be a string")),
    }
}

fn index_ids(nodes: &[Node]) -> Result<HashMap<&str, usize>, DagError> {
    let mut index_of = HashMap::with_capacity(nodes.len());
    for (index, node) in nodes.iter().enumerate() {
        if let Some(&first) = index_of.get(node.id.as_str()) {
            return Err(DagError::DuplicateId {
                id: node.id.clone(),
                first,
                index,
            });
        }
        index_of.insert(node.id.as_str(), index);
    }
    Ok(index_of)
}

/// Each node's dependencies as node positions, in `depends_on` order.
fn resolve_dependencies(
    nodes: &[Node],
    index_of: &HashMap<&str, usize>,
) -> Result<Vec<Vec<usize>>, DagError> {
    nodes
        .iter()
        .map(|node| {
            let mut resolved: Vec<usize> = Vec::with_capacity(node.depends_on.len());
            for dependency in &node.depends_on {
                if *dependency == node.id {
                    return Err(DagError::SelfDependency {
                        node: node.id.clone(),
                    });
                }
                let Some(&index) = index_of.get(dependency.as_str()) else {
                    return Err(DagError::UnknownDependency {
                        node: node.id.clone(),
                        missing: dependency.clone(),
                    });
                };
                if resolved.contains(&index) {
                    return Err(DagError::DuplicateDependency {
                        node: node.id.clone(),
                        dependency: dependency.clone(),
                    });
                }
                resolved.push(index);
            }
            Ok(resolved)
        })
        .collect()
}

/// Kahn's algorithm, always taking the ready node with the smallest position. Returns fewer
/// than all nodes when there is a cycle.
fn kahn_order(depends_on: &[Vec<usize>]) -> Vec<usize> {
    let mut waiting_on: Vec<usize> = depends_on.iter().map(Vec::len).collect();
    let mut dependents = vec![Vec::new(); depends_on.len()];
    for (node, dependencies) in depends_on.iter().enumerate() {
        for &dependency in dependencies {
            dependents[dependency].push(node);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..depends_on.len())
        .filter(|&node| waiting_on[node] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(depends_on.len());
    while let Some(Reverse(node)) = ready.pop() {
        order.push(node);
        for &dependent in &dependents[node] {
            waiting_on[dependent] -= 1;
            if waiting_on[dependent] == 0 {
                ready.push(Reverse(dependent));
            }
        }
    }
    order
}

/// Names the nodes of one cycle among the nodes Kahn's algorithm could not order.
///
/// Every unordered node has at least one unordered dependency, so walking from the first
/// unordered node along its first unordered dependency must revisit a node; the walk from
/// that node's first visit is a cycle. Deterministic: document and `depends_on` order.
fn find_cycle(nodes: &[Node], depends_on: &[Vec<usize>], order: &[usize]) -> Vec<String> {
    let mut ordered = vec![false; nodes.len()];
    for &node in order {
        ordered[node] = true;
    }
    let Some(start) = (0..nodes.len()).find(|&node| !ordered[node]) else {
        return Vec::new();
    };
    let mut visited_at: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut path = Vec::new();
    let mut current = start;
    while visited_at[current].is_none() {
        visited_at[current] = Some(path.len());
        path.push(current);
        // Invariant: an unordered node still waits on at least one unordered dependency.
        current = match depends_on[current]
            .iter()
            .find(|&&dependency| !ordered[dependency])
        {
            Some(&next) => next,
            None => break,
        };
    }
    let cycle_start = visited_at[current].unwrap_or(0);
    path[cycle_start..]
        .iter()
        .map(|&node| nodes[node].id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dag(nodes: Value) -> Value {
        json!({ "nodes": nodes })
    }

    fn order(value: Value) -> Vec<String> {
        let dag = validate_dag(&value).expect("valid dag");
        dag.topological_order()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn single_node_without_dependencies() {
        let valid = validate_dag(&dag(json!([{"id": "only", "action": "run.sh"}]))).expect("valid");
        assert_eq!(valid.nodes()[0].action.as_deref(), Some("run.sh"));
        assert_eq!(valid.topological_order(), vec!["only"]);
    }

    #[test]
    fn extra_fields_are_allowed_everywhere() {
        let value = json!({
            "name": "etl",
            "nodes": [{"id": "a", "retries": 3, "params": {"x": 1}}],
        });
        validate_dag(&value).expect("permissive");
    }

    #[test]
    fn diamond_orders_dependencies_first_ties_by_position() {
        let value = dag(json!([
            {"id": "report", "depends_on": ["left", "right"]},
            {"id": "right", "depends_on": ["extract"]},
            {"id": "left", "depends_on": ["extract"]},
            {"id": "extract"},
        ]));
        assert_eq!(order(value), ["extract", "right", "left", "report"]);
    }

    #[test]
    fn independent_nodes_keep_document_order() {
        let value = dag(json!([{"id": "c"}, {"id": "a"}, {"id": "b", "depends_on": []}]));
        assert_eq!(order(value), ["c", "a", "b"]);
    }

    #[test]
    fn order_puts_every_node_after_its_dependencies() {
        let value = dag(json!([
            {"id": "e", "depends_on": ["d", "b"]},
            {"id": "d", "depends_on": ["c"]},
            {"id": "c", "depends_on": ["a"]},
            {"id": "b", "depends_on": ["a"]},
            {"id": "a"},
        ]));
        let valid = validate_dag(&value).expect("valid");
        let order = valid.topological_order();
        let position = |id: &str| order.iter().position(|o| *o == id).expect("present");
        for node in valid.nodes() {
            for dependency in &node.depends_on {
                assert!(
                    position(dependency) < position(&node.id),
                    "{dependency} before {}",
                    node.id
                );
            }
        }
        assert_eq!(valid.node("d").expect("d").depends_on, ["c"]);
    }

    #[test]
    fn shape_errors_name_the_path() {
        let cases = [
            (json!([]), ""),
            (json!({}), "nodes"),
            (json!({"nodes": {}}), "nodes"),
            (dag(json!(["a"])), "nodes[0]"),
            (dag(json!([{"action": "x"}])), "nodes[0].id"),
            (dag(json!([{"id": 7}])), "nodes[0].id"),
            (dag(json!([{"id": ""}])), "nodes[0].id"),
            (dag(json!([{"id": "a".repeat(201)}])), "nodes[0].id"),
            (dag(json!([{"id": "a", "action": 1}])), "nodes[0].action"),
            (
                dag(json!([{"id": "a"}, {"id": "b", "depends_on": "a"}])),
                "nodes[1].depends_on",
            ),
            (
                dag(json!([{"id": "a"}, {"id": "b", "depends_on": ["a", 2]}])),
                "nodes[1].depends_on[1]",
            ),
        ];
        for (value, expected) in cases {
            match validate_dag(&value) {
                Err(DagError::Shape { path, .. }) => assert_eq!(path, expected, "{value}"),
                other => panic!("{value}: expected a shape error, got {other:?}"),
            }
        }
    }

    #[test]
    fn empty_and_oversized_node_lists_are_rejected() {
        assert_eq!(validate_dag(&dag(json!([]))), Err(DagError::Empty));
        let many: Vec<Value> = (0..=MAX_NODES)
            .map(|i| json!({"id": format!("n{i}")}))
            .collect();
        assert!(matches!(
            validate_dag(&dag(Value::Array(many))),
            Err(DagError::TooManyNodes { count: 10_001 })
        ));
    }

    #[test]
    fn duplicate_id_names_both_positions() {
        let res = validate_dag(&dag(json!([{"id": "a"}, {"id": "b"}, {"id": "a"}])));
        assert_eq!(
            res,
            Err(DagError::DuplicateId {
                id: "a".into(),
                first: 0,
                index: 2
            })
        );
    }

    #[test]
    fn unknown_dependency_names_node_and_reference() {
        let res = validate_dag(&dag(
            json!([{"id": "a"}, {"id": "b", "depends_on": ["a", "z"]}]),
        ));
        assert_eq!(
            res,
            Err(DagError::UnknownDependency {
                node: "b".into(),
                missing: "z".into()
            })
        );
    }

    #[test]
    fn self_dependency_names_the_node() {
        let res = validate_dag(&dag(json!([{"id": "a", "depends_on": ["a"]}])));
        assert_eq!(res, Err(DagError::SelfDependency { node: "a".into() }));
    }

    #[test]
    fn repeated_dependency_is_rejected() {
        let res = validate_dag(&dag(
            json!([{"id": "a"}, {"id": "b", "depends_on": ["a", "a"]}]),
        ));
        assert!(
            matches!(res, Err(DagError::DuplicateDependency { .. })),
            "{res:?}"
        );
    }

    #[test]
    fn two_node_cycle_names_both() {
        let res = validate_dag(&dag(json!([
            {"id": "a", "depends_on": ["b"]},
            {"id": "b", "depends_on": ["a"]},
        ])));
        assert_eq!(
            res,
            Err(DagError::Cycle {
                nodes: vec!["a".into(), "b".into()]
            })
        );
    }

    #[test]
    fn cycle_names_only_the_nodes_on_it() {
        // `start` feeds the cycle x -> y -> z -> x and `tail` hangs off it; only x, y, z are
        // on the cycle, and `tail` (which waits on it) is not named.
        let res = validate_dag(&dag(json!([
            {"id": "start"},
            {"id": "tail", "depends_on": ["z"]},
            {"id": "x", "depends_on": ["start", "z"]},
            {"id": "y", "depends_on": ["x"]},
            {"id": "z", "depends_on": ["y"]},
        ])));
        match res {
            Err(DagError::Cycle { nodes }) => assert_eq!(nodes, ["z", "y", "x"]),
            other => panic!("expected a cycle, got {other:?}"),
        }
    }

    #[test]
    fn nul_is_found_in_strings_and_keys_at_any_depth() {
        let cases = [
            (json!("a\u{0}"), true),
            (json!({"k\u{0}": 1}), true),
            (
                json!({"nodes": [{"id": "a", "x": [[{"y": "\u{0}"}]]}]}),
                true,
            ),
            (
                json!({"nodes": [{"id": "a", "x": [1, true, null, "ok"]}]}),
                false,
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(contains_nul(&value), expected, "{value}");
        }
        assert_eq!(NUL_RULE, r"must not contain NUL characters (\u0000)");
    }

    #[test]
    fn json_len_is_the_compact_serialization() {
        let value = json!({"nodes": [{"id": "a", "x": "é\u{1}\"", "n": [1.5, null]}]});
        assert_eq!(
            json_len(&value),
            serde_json::to_vec(&value).expect("json").len()
        );
    }

    #[test]
    fn cycle_message_spells_out_the_loop() {
        let error = DagError::Cycle {
            nodes: vec!["a".into(), "b".into()],
        };
        assert!(error.to_string().contains("a -> b -> a"));
    }
}
