//! The participants' compile-time step declarations.
//!
//! nasaga's participant takes a command's payload contract only from `#[saga]` step descriptors
//! linked into the binary (`COLLECTED_SAGA_STEPS`); a step without one accepts JSON alone
//! (participant.rs, `verified_command_identity`). The harness's world has one step with a raw,
//! schema-declared input — `beta/upload` v1 `store` (conformance/saga/_world.py) — so this host
//! declares it, as a real participant binary would. Nothing else is declared: every other step
//! keeps nasaga's JSON default.

use nasaga_core::{CancelMode, Compensation, ResolutionMode};
use nasaga_runtime_core::{SagaStepDescriptor, COLLECTED_SAGA_STEPS};

#[linkme::distributed_slice(COLLECTED_SAGA_STEPS)]
#[linkme(crate = linkme)]
static UPLOAD_STORE: SagaStepDescriptor = SagaStepDescriptor {
    payload_content_type: "application/octet-stream",
    payload_schema_id: "upload.v1",
    workflow: "upload",
    definition_version: 1,
    step: "store",
    binding: None,
    service_type: "ratchet_nasaga_host::HarnessStep",
    compensation: Compensation::NonCompensable,
    cancel_mode: CancelMode::ResolveOnly,
    allow_unknown: true,
    resolution_mode: Some(ResolutionMode::Poll),
    source: "hosts/nasaga/src/descriptors.rs",
};
