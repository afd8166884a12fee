//! Checks of a parsed template before it runs: which functions it calls and which values
//! (`.Name`, `$.Name`) it reads, each with its byte offset in the source.

use gotmpl::parse::{BranchNode, Expr, ListNode, Node, PipeNode};

/// A name used at a byte offset of the template source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The name (a function, or the first field of a value read).
    pub name: String,
    /// Byte offset in the template source.
    pub offset: usize,
}

/// What a template uses: every function call and every read of a top-level value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Uses {
    /// Function calls, in tree order.
    pub functions: Vec<Use>,
    /// Reads of the template's data: `.Name` where dot is still the data (outside `range` and
    /// `with` bodies), and `$.Name` anywhere. Only the first field is kept.
    pub values: Vec<Use>,
}

/// Collects the uses of `tree`, whose dot is the template's data when `dot_is_data`.
pub fn uses(tree: &ListNode, dot_is_data: bool) -> Uses {
    let mut u = Uses::default();
    list(tree, dot_is_data, &mut u);
    u
}

fn list(l: &ListNode, data: bool, u: &mut Uses) {
    for n in &l.nodes {
        node(n, data, u);
    }
}

fn node(n: &Node, data: bool, u: &mut Uses) {
    match n {
        Node::List(l) => list(l, data, u),
        Node::Action(a) => pipe(&a.pipe, data, u),
        Node::If(b) => branch(b, data, data, u),
        // `with` and `range` set dot to their pipeline's value inside the body.
        Node::With(b) | Node::Range(b) => branch(b, data, false, u),
        Node::Template(t) => {
            if let Some(p) = &t.pipe {
                pipe(p, data, u);
            }
        }
        Node::Define(d) => list(&d.body, false, u),
        Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
    }
}

fn branch(b: &BranchNode, data: bool, body_data: bool, u: &mut Uses) {
    pipe(&b.pipe, data, u);
    list(&b.body, body_data, u);
    if let Some(e) = &b.else_body {
        list(e, data, u);
    }
}

fn pipe(p: &PipeNode, data: bool, u: &mut Uses) {
    for c in &p.commands {
        for a in &c.args {
            expr(a, data, u);
        }
    }
}

fn expr(e: &Expr, data: bool, u: &mut Uses) {
    match e {
        Expr::Identifier(pos, name) => u.functions.push(Use {
            name: name.to_string(),
            offset: pos.offset,
        }),
        Expr::Field(pos, chain) if data => {
            if let Some(first) = chain.first() {
                u.values.push(Use {
                    name: first.to_string(),
                    offset: pos.offset,
                });
            }
        }
        Expr::Variable(pos, var, chain) if var.as_str() == "$" => {
            if let Some(first) = chain.first() {
                u.values.push(Use {
                    name: first.to_string(),
                    offset: pos.offset,
                });
            }
        }
        Expr::Pipe(_, p) => pipe(p, data, u),
        Expr::Chain(_, inner, _) => expr(inner, data, u),
        Expr::Field(..)
        | Expr::Variable(..)
        | Expr::Dot(_)
        | Expr::String(..)
        | Expr::Number(..)
        | Expr::Bool(..)
        | Expr::Nil(_) => {}
    }
}
