//! [`operations!`]: one party's operations declared once, as a table of one row per operation
//! (its variant, wire name, request body and reply body), from which everything else follows:
//!
//! - the op enum (the `<op>` token of the party's subjects), with `ALL` (the table's order),
//!   `name` (the wire name) and `encode_failure` (how a request refused unread is answered);
//! - the party's marker trait (`CoordinatorEndpoint`, `AgentEndpoint`...: an endpoint with its
//!   `OP`), and one endpoint type per row implementing it and [`crate::Endpoint`];
//! - the enum's documentation table (operation, wire name, request, reply).
//!
//! What differs between operations beyond their bodies' types lives with the body types
//! ([`crate::endpoint::RequestBody`]: id, deadline, checks; [`crate::endpoint::ReplyBody`]:
//! its own `error`, legacy failure fields, how it is written), so a row names all there is to
//! an operation. A row may override how its request is decoded (`, decode_request = path`, a
//! function of `(payload, what, speaker)`), for the one case that is a fact of the operation
//! and not of its body (the agent's status and inventory read no body).
//!
//! Adding an operation is one row (and its body types, if new); the compiler then asks for it
//! wherever a party matches on its op enum (the coordinator's dispatch, the agent's
//! registration).

/// Declares one party's operations (see the module docs):
///
/// ```ignore
/// operations! {
///     /// The party's operations.
///     pub enum PartyOp, served as PartyEndpoint {
///         /// What the operation does (the variant's and the endpoint type's doc).
///         Variant = "wire_name": RequestBody => ReplyBody;
///         Other = "other": NoArgs => OtherReply, decode_request = crate::endpoint::decode_unread;
///     }
/// }
/// ```
macro_rules! operations {
    (
        $(#[$enum_doc:meta])*
        pub enum $Op:ident, served as $Marker:ident {
            $(
                $(#[$doc:meta])*
                $Variant:ident = $name:literal: $Req:ident => $Reply:ident $(, decode_request = $decode:path)?;
            )*
        }
    ) => {
        $(#[$enum_doc])*
        ///
        /// | operation | wire name | request | reply |
        /// |---|---|---|---|
        $(
            #[doc = concat!(
                "| [`", stringify!($Variant), "`] | `", $name, "` | [`", stringify!($Req), "`] | [`",
                stringify!($Reply), "`] |"
            )]
        )*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $Op {
            $(
                $(#[$doc])*
                $Variant,
            )*
        }

        impl $Op {
            /// Every operation, in the table's order.
            pub const ALL: [$Op; [$($name),*].len()] = [$($Op::$Variant),*];

            /// The operation's wire name.
            pub const fn name(self) -> &'static str {
                match self {
                    $($Op::$Variant => $name,)*
                }
            }

            /// The failure body operation `self`'s endpoint sends (each with its reply's legacy
            /// fields, [`crate::Endpoint::encode_failure`]): how a request refused unread is
            /// answered.
            pub fn encode_failure(self, f: &$crate::Failure) -> bytes::Bytes {
                match self {
                    $($Op::$Variant => <$Variant as $crate::Endpoint>::encode_failure(f),)*
                }
            }
        }

        #[doc = concat!("An endpoint of [`", stringify!($Op), "`], with its operation (the subject token).")]
        pub trait $Marker: $crate::Endpoint {
            /// The operation.
            const OP: $Op;
        }

        $(
            #[doc = concat!("The `", $name, "` endpoint ([`", stringify!($Op), "::", stringify!($Variant), "`]).")]
            pub struct $Variant;

            impl $Marker for $Variant {
                const OP: $Op = $Op::$Variant;
            }

            impl $crate::Endpoint for $Variant {
                const NAME: &'static str = $name;
                type Request = $Req;
                type Reply = $Reply;
                $(
                    fn decode_request(payload: &[u8], speaker: &str) -> Result<$Req, $crate::DecodeError> {
                        $decode(payload, Self::NAME, speaker)
                    }
                )?
            }
        )*
    };
}

pub(crate) use operations;

#[cfg(test)]
mod tests {
    use crate::agent::{self, AgentEndpoint, AgentOp};
    use crate::coordinator::{self, CoordinatorEndpoint, CoordinatorOp};
    use crate::provisioner::{self, ProvisionerOp};
    use crate::{Endpoint, Failure};

    /// The wire names of docs/design.md §5, in the tables' order (the order metrics and
    /// subscriptions follow).
    #[test]
    fn the_tables_give_the_contracts_names() {
        assert_eq!(
            CoordinatorOp::ALL.map(CoordinatorOp::name),
            [
                "submit", "complete", "why_not", "clusters", "list", "get", "replay", "cluster", "changes", "count",
                "what_if", "drain", "undrain"
            ]
        );
        assert_eq!(
            AgentOp::ALL.map(AgentOp::name),
            [
                "plan",
                "commit",
                "release",
                "complete",
                "why_not",
                "status",
                "inventory",
                "restored",
                "jobs",
                "answer"
            ]
        );
        assert_eq!(ProvisionerOp::ALL.map(ProvisionerOp::name), ["provision", "delete"]);
        assert_eq!(
            (coordinator::Changes::OP, coordinator::Changes::NAME),
            (CoordinatorOp::Changes, "changes")
        );
        assert_eq!((agent::WhyNot::OP, agent::WhyNot::NAME), (AgentOp::WhyNot, "why_not"));
        assert_eq!(provisioner::Delete::NAME, "delete");
    }

    /// An op's `encode_failure` is its endpoint's (with the endpoint's legacy fields).
    #[test]
    fn an_ops_failure_body_is_its_endpoints() {
        let f = Failure::bad_request("no");
        assert_eq!(
            CoordinatorOp::Replay.encode_failure(&f),
            coordinator::Replay::encode_failure(&f)
        );
        assert_eq!(AgentOp::Jobs.encode_failure(&f), agent::Jobs::encode_failure(&f));
        assert!(String::from_utf8_lossy(&CoordinatorOp::Replay.encode_failure(&f)).contains("\"identical\":false"));
        assert!(String::from_utf8_lossy(&AgentOp::Jobs.encode_failure(&f)).contains("\"volumes\":[]"));
    }

    /// A row's `decode_request` override: the agent's status reads no body; the coordinator's
    /// clusters takes an empty body or a versioned object, nothing else.
    #[test]
    fn a_rows_decoder_overrides_its_bodys() {
        assert!(agent::Status::decode_request(b"not json", "agent").is_ok());
        assert!(agent::Inventory::decode_request(b"[1]", "agent").is_ok());
        assert!(coordinator::Clusters::decode_request(b"", "coordinator").is_ok());
        assert!(coordinator::Clusters::decode_request(br#"{"v":1,"x":2}"#, "coordinator").is_ok());
        assert!(coordinator::Clusters::decode_request(b"not json", "coordinator").is_err());
    }
}
