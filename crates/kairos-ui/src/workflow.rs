//! A workflow's page (`/ui/workflows/{id}`): its stored versions, newest first, and the
//! selected version's DAG (`?version=N`, default the newest) drawn as server-rendered SVG:
//! nodes in columns by dependency depth (a node with no `depends_on` is in the first
//! column, any other one column right of its deepest dependency), one arrow per
//! dependency, from the dependency to the node that waits for it.

use kairos_registrar::dag::{validate_dag, Node as DagNode};
use kairos_registrar::{Error, Problem, Registrar, WORKFLOW_VERSIONS_MAX};
use maud::{html, Markup};

use crate::links::workflow_href;
use crate::params::Params;
use crate::time::in_zone;
use crate::Viewer;

/// Width and height of a node's box, in SVG units.
const NODE_W: usize = 180;
const NODE_H: usize = 36;
/// Space between columns and between rows.
const GAP_X: usize = 70;
const GAP_Y: usize = 20;
/// Margin around the drawing.
const MARGIN: usize = 12;
/// Characters of a node id shown in its box (the whole id is its tooltip and `data-node`).
const LABEL_CHARS: usize = 22;

/// The workflow fragment for `workflow_id` and the query `params` (`version`).
///
/// # Errors
/// [`Error::Invalid`] for a bad id or `version`; [`Error::NotFound`] for a workflow with no
/// stored version or a version not stored; a store error.
pub async fn workflow(
    registrar: &Registrar,
    workflow_id: &str,
    params: Params,
    viewer: Viewer,
) -> Result<String, Error> {
    let mut params = params;
    let version = params.text("version");
    params.finish()?;
    let version = version.map(|text| parse_version(&text)).transpose()?;
    let versions = registrar.workflow_versions(workflow_id).await?;
    let selected = version.unwrap_or(versions[0]);
    let view = registrar
        .get_workflow(workflow_id, i64::from(selected))
        .await?;
    // A stored DAG passed this check on deploy; should one not, the page says so.
    let (drawing, unreadable) = match validate_dag(&view.dag) {
        Ok(dag) => (Drawing::of(dag.nodes()), None),
        Err(err) => (Drawing::of(&[]), Some(err.to_string())),
    };
    let markup = html! {
        h1 { "Workflow " (workflow_id) }
        (crate::actions::role_note(viewer))
        p {
            a.schedules-of href=(format!("/ui?workflow_id={workflow_id}")) { "Schedules of " (workflow_id) }
        }
        section.versions aria-labelledby="versions-title" {
            h2 #versions-title { "Versions" }
            @if versions.len() as i64 == WORKFLOW_VERSIONS_MAX {
                p.muted { "The newest " (WORKFLOW_VERSIONS_MAX) " versions." }
            }
            ul.versions #versions {
                @for v in &versions {
                    li data-version=(v) {
                        @if *v == selected {
                            a href=(workflow_href(workflow_id, Some(*v))) aria-current="page" { "version " (v) }
                        } @else {
                            a href=(workflow_href(workflow_id, Some(*v))) { "version " (v) }
                        }
                    }
                }
            }
        }
        section.dag aria-labelledby="dag-title" {
            h2 #dag-title { "DAG of version " (selected) }
            p.muted {
                (count(drawing.nodes.len(), "node", "nodes")) ", "
                (count(drawing.edges.len(), "dependency", "dependencies")) "; stored "
                (in_zone(view.created_at, "UTC"))
                ". An arrow goes from a node to one that waits for it."
            }
            @if let Some(why) = unreadable {
                p.problem { "The stored DAG cannot be drawn: " (why) }
            } @else {
                (drawing.svg())
            }
        }
    };
    Ok(markup.into_string())
}

/// `1 node`, `2 nodes`: `n` and the noun in the number it takes.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn parse_version(text: &str) -> Result<i32, Error> {
    // Digits only, no leading zero: `+5` and `05` are not how a version is written.
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<i32>() {
        Ok(version) if digits && version >= 1 && !text.starts_with('0') => Ok(version),
        _ => Err(Error::Invalid(vec![Problem::new(
            "version",
            format!("{text:?} is not a version number (a whole number from 1)"),
        )])),
    }
}

/// A node placed in the drawing.
struct Node {
    id: String,
    column: usize,
    row: usize,
}

/// A DAG laid out in columns by dependency depth.
struct Drawing {
    nodes: Vec<Node>,
    /// (dependency, dependent) as indices into `nodes`.
    edges: Vec<(usize, usize)>,
}

impl Drawing {
    /// Lays out the nodes of a validated DAG (unique ids, known dependencies, no cycle).
    fn of(dag: &[DagNode]) -> Drawing {
        let raw: Vec<(String, Vec<String>)> = dag
            .iter()
            .map(|node| (node.id.clone(), node.depends_on.clone()))
            .collect();
        let index: std::collections::HashMap<&str, usize> = raw
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (id.as_str(), i))
            .collect();
        let mut edges = Vec::new();
        for (to, (_, deps)) in raw.iter().enumerate() {
            for dep in deps {
                if let Some(&from) = index.get(dep.as_str()) {
                    edges.push((from, to));
                }
            }
        }
        // Depth by Kahn's algorithm: a node's column is one past its deepest dependency.
        let n = raw.len();
        let mut waiting = vec![0usize; n];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(from, to) in &edges {
            waiting[to] += 1;
            dependents[from].push(to);
        }
        let mut column = vec![0usize; n];
        let mut ready: std::collections::VecDeque<usize> =
            (0..n).filter(|&i| waiting[i] == 0).collect();
        while let Some(i) = ready.pop_front() {
            for &next in &dependents[i] {
                column[next] = column[next].max(column[i] + 1);
                waiting[next] -= 1;
                if waiting[next] == 0 {
                    ready.push_back(next);
                }
            }
        }
        let mut rows_used: Vec<usize> = Vec::new();
        let nodes = raw
            .into_iter()
            .zip(column)
            .map(|((id, _), column)| {
                if rows_used.len() <= column {
                    rows_used.resize(column + 1, 0);
                }
                let row = rows_used[column];
                rows_used[column] += 1;
                Node { id, column, row }
            })
            .collect();
        Drawing { nodes, edges }
    }

    fn x(column: usize) -> usize {
        MARGIN + column * (NODE_W + GAP_X)
    }

    fn y(row: usize) -> usize {
        MARGIN + row * (NODE_H + GAP_Y)
    }

    fn svg(&self) -> Markup {
        let columns = self.nodes.iter().map(|n| n.column + 1).max().unwrap_or(1);
        let rows = self.nodes.iter().map(|n| n.row + 1).max().unwrap_or(1);
        let width = 2 * MARGIN + columns * NODE_W + (columns - 1) * GAP_X;
        let height = 2 * MARGIN + rows * NODE_H + (rows - 1) * GAP_Y;
        html! {
            div.dag-wrap {
                svg.dag #dag xmlns="http://www.w3.org/2000/svg" role="img"
                    width=(width) height=(height) viewBox=(format!("0 0 {width} {height}"))
                    aria-labelledby="dag-title" {
                    defs {
                        marker #arrow viewBox="0 0 10 10" refX="10" refY="5"
                            markerWidth="8" markerHeight="8" orient="auto-start-reverse" {
                            path.arrowhead d="M 0 0 L 10 5 L 0 10 z" {}
                        }
                    }
                    @for &(from, to) in &self.edges {
                        (self.edge(from, to))
                    }
                    @for node in &self.nodes {
                        (Self::node(node))
                    }
                }
            }
        }
    }

    fn edge(&self, from: usize, to: usize) -> Markup {
        let (a, b) = (&self.nodes[from], &self.nodes[to]);
        let x1 = Self::x(a.column) + NODE_W;
        let y1 = Self::y(a.row) + NODE_H / 2;
        let x2 = Self::x(b.column);
        let y2 = Self::y(b.row) + NODE_H / 2;
        let bend = (x2.saturating_sub(x1)) / 2;
        let d = format!(
            "M {x1} {y1} C {} {y1}, {} {y2}, {x2} {y2}",
            x1 + bend,
            x2.saturating_sub(bend)
        );
        html! {
            path.edge d=(d) marker-end="url(#arrow)" data-from=(a.id) data-to=(b.id) {}
        }
    }

    fn node(node: &Node) -> Markup {
        let x = Self::x(node.column);
        let y = Self::y(node.row);
        let label: String = if node.id.chars().count() > LABEL_CHARS {
            let mut short: String = node.id.chars().take(LABEL_CHARS - 1).collect();
            short.push('…');
            short
        } else {
            node.id.clone()
        };
        html! {
            g.node data-node=(node.id) {
                title { (node.id) }
                rect x=(x) y=(y) width=(NODE_W) height=(NODE_H) rx="6" {}
                text x=(x + 10) y=(y + NODE_H / 2 + 5) { (label) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, depends_on: &[&str]) -> DagNode {
        DagNode {
            id: id.into(),
            action: None,
            depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn columns_follow_the_deepest_dependency() {
        let dag = [node("c", &["a", "b"]), node("a", &[]), node("b", &["a"])];
        let drawing = Drawing::of(&dag);
        let columns: Vec<(&str, usize, usize)> = drawing
            .nodes
            .iter()
            .map(|n| (n.id.as_str(), n.column, n.row))
            .collect();
        assert_eq!(columns, vec![("c", 2, 0), ("a", 0, 0), ("b", 1, 0)]);
        assert_eq!(drawing.edges, vec![(1, 0), (2, 0), (1, 2)]);
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(count(1, "dependency", "dependencies"), "1 dependency");
        assert_eq!(count(2, "dependency", "dependencies"), "2 dependencies");
        assert_eq!(count(0, "node", "nodes"), "0 nodes");
    }
}
