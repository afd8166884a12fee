//! Where rendering is: the position of the action being run, for error messages.
//!
//! `gotmpl` reports run-time errors without a position. fedvol therefore rewrites the parsed
//! tree before running it: in front of every action, `if`, `range`, `with`, `template`,
//! `break` and `continue` it inserts an action calling [`MARK`] with that node's byte offset.
//! The marker prints nothing (it returns the empty string) and only records the offset, so
//! when an error comes, the last recorded offset is the action that raised it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gotmpl::Value;
use gotmpl::parse::{ActionNode, BranchNode, CommandNode, Expr, ListNode, Node, Number, PipeNode, Pos};

/// The marker function's name: not a Go identifier a template could spell (it starts with two
/// underscores, which the check of function names would refuse anyway: it is not a function
/// fedvol lists).
pub const MARK: &str = "__fedvol_at";

/// Records the offset of the action being rendered (shared by the marker function).
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    at: Arc<AtomicUsize>,
}

impl Tracker {
    /// The marker function: records its one integer argument and returns "".
    pub fn mark_fn(&self) -> impl Fn(&[Value]) -> gotmpl::Result<Value> + Send + Sync + 'static {
        let at = Arc::clone(&self.at);
        move |args: &[Value]| {
            if let Some(Value::Int(o)) = args.first() {
                at.store(usize::try_from(*o).unwrap_or(0), Ordering::Relaxed);
            }
            Ok(Value::String("".into()))
        }
    }

    /// The byte offset of the last node that started running.
    pub fn offset(&self) -> usize {
        self.at.load(Ordering::Relaxed)
    }
}

/// `tree` with a marker in front of every node that runs code.
pub fn instrument(tree: &ListNode) -> ListNode {
    ListNode {
        pos: tree.pos,
        nodes: tree.nodes.iter().flat_map(instrument_node).collect(),
    }
}

fn instrument_node(n: &Node) -> Vec<Node> {
    let at = |pos: Pos, n: Node| vec![marker(pos), n];
    match n {
        Node::Text(_) => vec![n.clone()],
        Node::List(l) => vec![Node::List(instrument(l))],
        Node::Action(a) => at(a.pos, n.clone()),
        Node::If(b) => at(b.pos, Node::If(instrument_branch(b))),
        Node::Range(b) => at(b.pos, Node::Range(instrument_branch(b))),
        Node::With(b) => at(b.pos, Node::With(instrument_branch(b))),
        Node::Template(t) => at(t.pos, n.clone()),
        Node::Break(p) | Node::Continue(p) => at(*p, n.clone()),
        Node::Define(_) => vec![n.clone()],
    }
}

fn instrument_branch(b: &BranchNode) -> BranchNode {
    BranchNode {
        pos: b.pos,
        pipe: b.pipe.clone(),
        body: instrument(&b.body),
        else_body: b.else_body.as_ref().map(instrument),
    }
}

/// `{{__fedvol_at OFFSET}}` at `pos`.
fn marker(pos: Pos) -> Node {
    Node::Action(ActionNode {
        pos,
        pipe: PipeNode {
            pos,
            decl: Vec::new(),
            commands: vec![CommandNode {
                pos,
                args: vec![
                    Expr::Identifier(pos, MARK.into()),
                    Expr::Number(pos, Number::Int(i64::try_from(pos.offset).unwrap_or(i64::MAX))),
                ],
            }],
            is_assign: false,
        },
    })
}
