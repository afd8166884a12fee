//! [`Failure`]: the one error body every party answers with when a request could not be
//! served, whatever the operation:
//!
//! ```json
//! {"v": 1, "ok": false, "cluster": "cluster-a", "request_id": "r-1",
//!  "error": {"code": "bad_request", "message": "plan: missing field `request`"}}
//! ```
//!
//! `cluster` and `request_id` are there when the sender knows them (a body it could not read
//! has no request id). `ok: false` and the fields an endpoint's previous reply readers required
//! ([`crate::ReplyBody::legacy_failure_fields`]) are added so that peers of the previous
//! release read a failure as they read their own error replies (docs/design.md §5: fields are added,
//! never renamed).

use bytes::Bytes;
use serde::Serialize;

use crate::code::{Code, ProtoError};

/// Why a request could not be served (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, thiserror::Error)]
#[error("{}{}", .cluster.as_ref().map(|c| format!("cluster {c}: ")).unwrap_or_default(), .error)]
pub struct Failure {
    /// The error.
    pub error: ProtoError,
    /// The cluster that answered, when an agent answered.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The request, when it could be read.
    #[serde(default)]
    pub request_id: Option<String>,
}

impl Failure {
    /// A failure with `code` and `message`, naming nobody.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Failure {
            error: code.error(message),
            cluster: None,
            request_id: None,
        }
    }

    /// `bad_request` with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(Code::BadRequest, message)
    }

    /// The same failure, naming the answering `cluster`.
    pub fn from_cluster(mut self, cluster: &str) -> Self {
        self.cluster = Some(cluster.to_string());
        self
    }

    /// The same failure, naming the request.
    pub fn for_request(mut self, request_id: &str) -> Self {
        self.request_id = Some(request_id.to_string());
        self
    }

    /// The failure's code.
    pub fn code(&self) -> &Code {
        &self.error.code
    }

    /// The wire body, with `extra` fields (an endpoint's legacy fields) after the standard
    /// ones. Fields of `extra` never replace a standard one.
    pub fn encode_with(&self, extra: serde_json::Map<String, serde_json::Value>) -> Bytes {
        #[derive(Serialize)]
        struct Body<'a> {
            ok: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            cluster: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            request_id: Option<&'a str>,
            error: &'a ProtoError,
            #[serde(flatten)]
            extra: serde_json::Map<String, serde_json::Value>,
        }
        let mut extra = extra;
        for k in ["v", "ok", "error"] {
            extra.remove(k);
        }
        if self.cluster.is_some() {
            extra.remove("cluster");
        }
        if self.request_id.is_some() {
            extra.remove("request_id");
        }
        crate::version::encode(&Body {
            ok: false,
            cluster: self.cluster.as_deref(),
            request_id: self.request_id.as_deref(),
            error: &self.error,
            extra,
        })
    }
}

impl From<ProtoError> for Failure {
    fn from(error: ProtoError) -> Self {
        Failure {
            error,
            cluster: None,
            request_id: None,
        }
    }
}
