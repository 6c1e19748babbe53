//! nasaga's gRPC transport (feature `grpc-transport`) under the harness (docs/transports.md).
//!
//! Per namespace one listener set, each a `nagrpc` `ServerPlan` on `127.0.0.1:0` with nasaga's
//! generated servers and nagrpc's own TLS (`GrpcTlsIdentity`, rustls): per participant owner
//!
//! * `command:<owner>`: `SagaGrpcCommandTransportService` over nasaga's participant runtime on the
//!   owner's datasource (the harness's step, `StreamStep`), bound to the orchestrator's client
//!   certificate;
//! * `result:<owner>`: `SagaGrpcResultTransportService` over the namespace's orchestrator, bound
//!   to that owner's client certificate;
//!
//! all under mutual TLS (`GrpcTlsIdentity::mutual`: a client certificate of the run's CA is
//! demanded in the handshake), plus `open:result:<first owner>`, the same result service behind
//! TLS that demands no client certificate, so nasaga's own identity check is what refuses an
//! unauthenticated call. The binding is nasaga's: the principal is the SHA-256 of the client's
//! leaf certificate (`nagrpc::client_certificate_principal`), frozen to one producer at start.
//! The certificates are the harness's, generated per run (`impls/transport/_tls.py`).
//!
//! Nothing of the service is re-implemented: identity, decoding, the local transaction and the
//! closed receipt are nasaga's; the host only counts the handler calls behind each listener, so
//! the harness can tell a call refused before the handler from one that reached it.
//!
//! Ops: `grpc_open`, `grpc_decide`, `grpc_calls`, `grpc_close`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nagrpc::{GrpcServerHandle, GrpcTlsIdentity, ManagedGrpcService, ServerPlan};
use nasaga_core::ServiceIdentity;
use nasaga_runtime_core::grpc_proto::saga_command_transport_server::SagaCommandTransportServer;
use nasaga_runtime_core::grpc_proto::saga_result_transport_server::SagaResultTransportServer;
use nasaga_runtime_core::{
    HandleOutcome, Orchestrator, SagaGrpcCommandTransportService, SagaGrpcPeerBinding,
    SagaGrpcResultTransportService, SagaResultEnvelope, SagaResultHandler,
};
use serde_json::{json, Value};

use crate::engine::Engine;
use crate::host::Host;
use crate::protocol::{bad, Args, HostError};
use crate::sets::Registry;
use crate::step::Decision;
use crate::transport::StreamStep;

/// The orchestrator behind the result listeners, counting the calls that reached it. (The trait's
/// traced entry defaults to this one: the receipt's trace context is not under test.)
struct CountedResults<E: Engine> {
    orchestrator: Arc<Orchestrator<E::Backend>>,
    calls: AtomicU32,
}

impl<E: Engine> SagaResultHandler for CountedResults<E> {
    async fn handle_authenticated_result(
        &self,
        envelope: &SagaResultEnvelope,
        producer: &ServiceIdentity,
        now_ms: i64,
    ) -> anyhow::Result<HandleOutcome> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.orchestrator
            .handle_authenticated_result(envelope, producer, now_ms)
            .await
    }
}

struct GrpcSet<E: Engine> {
    listeners: BTreeMap<String, GrpcServerHandle>,
    steps: BTreeMap<String, Arc<StreamStep<E>>>,
    results: Arc<CountedResults<E>>,
}

static SETS: Registry = Registry::new("gRPC", "host.no_grpc", "grpc_open first");

fn set_of<E: Engine>(namespace: &str) -> anyhow::Result<Arc<GrpcSet<E>>> {
    SETS.get::<GrpcSet<E>>(namespace)
}

fn grpc_error(what: &str, error: impl std::fmt::Display) -> anyhow::Error {
    HostError::new("host.grpc", format!("{what}: {error}")).into()
}

/// The harness's certificates live a day: nagrpc's default start gate asks for a day left, so the
/// listener asks for an hour (and keeps nagrpc's default clock skew).
fn identity(args: &Args<'_>, mutual: bool) -> anyhow::Result<GrpcTlsIdentity> {
    let cert = args.str("server_cert_pem")?.as_bytes().to_vec();
    let key = args.str("server_key_pem")?.as_bytes().to_vec();
    let made = if mutual {
        GrpcTlsIdentity::mutual(cert, key, args.str("client_ca_pem")?.as_bytes().to_vec())
    } else {
        GrpcTlsIdentity::server(cert, key)
    };
    made.and_then(|i| {
        i.certificate_lifetime_policy(Duration::from_secs(3600), Duration::from_secs(300))
    })
    .map_err(|e| grpc_error("TLS identity", e))
}

async fn serve(
    service: impl ManagedGrpcService,
    tls: GrpcTlsIdentity,
) -> anyhow::Result<GrpcServerHandle> {
    let bind: SocketAddr = ([127, 0, 0, 1], 0).into();
    ServerPlan::new()
        .add_service(service)
        .map_err(|e| grpc_error("service", e))?
        .tls(tls)
        .start(bind)
        .await
        .map_err(|e| grpc_error("listener", e))
}

fn principal(pem: &str) -> anyhow::Result<String> {
    nagrpc::client_certificate_principal(pem.as_bytes())
        .map_err(|e| grpc_error("client certificate", e))
}

impl<E: Engine> Host<E> {
    /// `grpc_open {namespace, server_cert_pem, server_key_pem, client_ca_pem,
    /// orchestrator_cert_pem, owner_cert_pems: {owner: pem}, plant?}`: the namespace's listeners
    /// (module doc); answers `{listeners: {name: port}, principals: {identity: "sha256:..."}}`.
    pub async fn grpc_open(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let trusts = namespace.command_trusts()?;
        // A planted listener bug for the harness's own test (examples/broken_nasaga_grpc.py):
        // the result listeners' TLS asks for no client certificate.
        let asks_none = match args.opt_str("plant")? {
            None => false,
            Some("result_tls_asks_none") => true,
            Some(other) => return Err(bad(format!("unknown plant {other}"))),
        };
        let orchestrator_principal = principal(args.str("orchestrator_cert_pem")?)?;
        let owner_pems = args
            .value("owner_cert_pems")?
            .as_object()
            .ok_or_else(|| bad("owner_cert_pems: {owner: pem}"))?;
        let results = Arc::new(CountedResults::<E> {
            orchestrator: Arc::clone(&namespace.orchestrator),
            calls: AtomicU32::new(0),
        });
        let mut principals = BTreeMap::from([(
            namespace.orch_identity.as_str().to_owned(),
            orchestrator_principal.clone(),
        )]);
        let mut listeners = BTreeMap::new();
        let mut steps = BTreeMap::new();
        for (index, (owner, pem)) in owner_pems.iter().enumerate() {
            let role = namespace.owner(owner)?;
            let pem = pem
                .as_str()
                .ok_or_else(|| bad("a certificate is PEM text"))?;
            let owner_principal = principal(pem)?;
            let identity_of_owner = ServiceIdentity::new(owner)?;
            let step = Arc::new(StreamStep::<E>::new(
                owner,
                &role.datasource,
                trusts.clone(),
            ));
            let commands = SagaGrpcCommandTransportService::new(
                Arc::clone(&step),
                SagaGrpcPeerBinding::new(
                    orchestrator_principal.clone(),
                    namespace.orch_identity.clone(),
                )?,
            );
            let handle = serve(
                SagaCommandTransportServer::new(commands),
                identity(args, true)?,
            )
            .await?;
            listeners.insert(format!("command:{owner}"), handle);
            let binding = SagaGrpcPeerBinding::new(owner_principal.clone(), identity_of_owner)?;
            let result_service = |binding: SagaGrpcPeerBinding| {
                SagaResultTransportServer::from_arc(Arc::new(SagaGrpcResultTransportService::new(
                    Arc::clone(&results),
                    binding,
                )))
            };
            let handle =
                serve(result_service(binding.clone()), identity(args, !asks_none)?).await?;
            listeners.insert(format!("result:{owner}"), handle);
            if index == 0 {
                let handle = serve(result_service(binding), identity(args, false)?).await?;
                listeners.insert(format!("open:result:{owner}"), handle);
            }
            principals.insert(owner.clone(), owner_principal);
            steps.insert(owner.clone(), step);
        }
        let ports: BTreeMap<String, u16> = listeners
            .iter()
            .map(|(name, handle)| (name.clone(), handle.local_addr().port()))
            .collect();
        let set = GrpcSet::<E> {
            listeners,
            steps,
            results,
        };
        if let Some(old) = SETS.insert(namespace.name.clone(), set) {
            shut(&old).await;
        }
        Ok(json!({"listeners": ports, "principals": principals}))
    }

    /// `grpc_decide {namespace, owner, decision}`: what the business code behind the owner's
    /// command listener answers from now on.
    pub async fn grpc_decide(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let step = set
            .steps
            .get(args.str("owner")?)
            .ok_or_else(|| bad("no command listener for this owner"))?;
        let text = args.str("decision")?;
        let decision =
            Decision::parse(text).ok_or_else(|| bad(format!("unknown decision {text}")))?;
        *step
            .decision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = decision;
        Ok(json!({"decision": text}))
    }

    /// `grpc_calls {namespace}`: handler calls so far behind each owner's command listener
    /// (`commands`) and behind every result listener together (`results`), and each listener's
    /// state as nagrpc reports it.
    pub async fn grpc_calls(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let namespace = self.ns(args)?;
        let set = set_of::<E>(&namespace.name)?;
        let commands: BTreeMap<&String, u32> = set
            .steps
            .iter()
            .map(|(owner, step)| (owner, step.calls.load(Ordering::SeqCst)))
            .collect();
        let states: BTreeMap<&String, String> = set
            .listeners
            .iter()
            .map(|(name, handle)| (name, format!("{:?}", handle.state())))
            .collect();
        Ok(json!({
            "commands": commands,
            "results": set.results.calls.load(Ordering::SeqCst),
            "states": states,
        }))
    }

    /// `grpc_close {namespace, grace_ms?}`: drains and stops every listener of the namespace.
    pub async fn grpc_close(&self, args: &Args<'_>) -> anyhow::Result<Value> {
        let name = args.str("namespace")?;
        let mut stopped = 0;
        if let Some(set) = SETS.remove::<GrpcSet<E>>(name) {
            stopped = shut(&set).await;
        }
        Ok(json!({"stopped": stopped}))
    }
}

/// nagrpc's drain: health goes NOT_SERVING, no new calls, in-flight ones finish (bounded).
async fn shut<E: Engine>(set: &GrpcSet<E>) -> usize {
    let mut stopped = 0;
    for handle in set.listeners.values() {
        if handle
            .shutdown_with_timeout(Duration::from_millis(500))
            .await
            .is_ok()
        {
            stopped += 1;
        }
    }
    stopped
}
