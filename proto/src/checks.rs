//! The checks of request bodies beyond their shape that more than one operation applies (a plan,
//! a why_not and a submit carry a workflow; a plan and a submit carry choice options).

use crate::code::ProtoError;

/// The workflow limits of [`fedvol_common::limits`], as a `bad_request` error naming `what`.
pub(crate) fn workflow_limits(what: &str, wf: &fedvol_common::model::Workflow) -> Result<(), ProtoError> {
    let problems = fedvol_common::limits::workflow_problems(wf);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(crate::Code::BadRequest.error(format!("{what}: {}", fedvol_common::limits::join_problems(&problems))))
    }
}

/// A request's choice options with default hours out of range are `bad_request`.
pub(crate) fn choice_options(what: &str, o: Option<&fedvol_common::choice::ChoiceOptions>) -> Result<(), ProtoError> {
    match o.map(fedvol_common::choice::ChoiceOptions::check) {
        Some(Err(e)) => Err(crate::Code::BadRequest.error(format!("{what}: choice: {e}"))),
        _ => Ok(()),
    }
}
