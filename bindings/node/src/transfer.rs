//! `sendFile` / `recvFile`: the `opsel-transfer` crate's one-transfer
//! functions. A transfer blocks for as long as the file takes, so each runs
//! as an `AsyncTask` on the libuv pool and returns a Promise (a synchronous
//! call would stall the event loop, and a sender and receiver in one process
//! would deadlock). Conversions only: the descriptor is duplicated (the
//! caller's socket stays open and theirs), the spec (camelCase object or JSON
//! text) goes through the crate's `SendSpec` / `RecvSpec`, the report comes
//! back in its serde form with camelCase keys. A send takes an optional
//! `AbortSignal`: aborting it raises the transfer's stop flag (the sending
//! ends early and the receiver keeps a verified prefix).

use std::net::{TcpListener, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::convert::{core_value_or_default, js_form};
use crate::error::{coded_error_value, guard, invalid, to_js, Code};
use crate::sys::off_loop;
use napi::bindgen_prelude::*;
use napi::{JsFunction, JsObject, JsUnknown};
use napi_derive::napi;
use opsel_transfer::{RecvSpec, SendSpec};

type R<T> = napi::Result<T, Code>;

enum Job {
    Send(i32, String, Box<SendSpec>, Arc<AtomicBool>),
    Recv(i32, String, RecvSpec),
}

pub struct Transfer(Option<Job>);

/// An owned duplicate of the caller's descriptor (checked on the caller's
/// thread, so a closed one fails before the Promise).
fn dup(fd: i32) -> R<OwnedFd> {
    if fd < 0 {
        return Err(invalid(format!(
            "socket descriptor {fd} is negative; pass the socket's descriptor"
        )));
    }
    // SAFETY: the caller keeps `fd` open for the duration of the call.
    unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|e| invalid(format!("descriptor {fd}: {e}")))
}

impl Task for Transfer {
    type Output = R<serde_json::Value>;
    type JsValue = JsUnknown;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        off_loop("transfer", || {
            match self
                .0
                .take()
                .ok_or_else(|| invalid("this transfer already ran"))?
            {
                Job::Send(fd, path, spec, stop) => {
                    let ctl = TcpStream::from(dup(fd)?);
                    opsel_transfer::send_file(ctl, path.as_ref(), &spec, &stop, &mut |_| {})
                        .map(|r| js_form(&r))
                }
                Job::Recv(fd, path, spec) => {
                    let l = TcpListener::from(dup(fd)?);
                    opsel_transfer::recv_file(l, path.as_ref(), &spec).map(|r| js_form(&r))
                }
            }
            .map_err(to_js)
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        match output {
            Ok(v) => env.to_js_value(&v),
            Err(e) => Err(coded_error_value(env, e)),
        }
    }
}

/// A stop flag raised when `signal` (an `AbortSignal`) aborts: already
/// aborted, or on its `abort` event (the listener runs on the event loop
/// and only stores the flag the transfer thread reads).
fn stop_on_abort(env: &Env, signal: Option<JsObject>) -> R<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let Some(sig) = signal else {
        return Ok(stop);
    };
    let not_signal = || invalid("signal must be an AbortSignal (new AbortController().signal)");
    let add: JsFunction = sig
        .get_named_property::<JsUnknown>("addEventListener")
        .ok()
        .filter(|f| matches!(f.get_type(), Ok(napi::ValueType::Function)))
        .map(|f| unsafe { f.cast::<JsFunction>() })
        .ok_or_else(not_signal)?;
    let aborted: bool = sig
        .get_named_property::<napi::JsBoolean>("aborted")
        .and_then(|b| b.get_value())
        .map_err(|_| not_signal())?;
    if aborted {
        stop.store(true, Ordering::Relaxed);
        return Ok(stop);
    }
    let flag = Arc::clone(&stop);
    let listener = env
        .create_function_from_closure("opselStopOnAbort", move |ctx| {
            flag.store(true, Ordering::Relaxed);
            ctx.env.get_undefined()
        })
        .map_err(|e| invalid(format!("signal: {e}")))?;
    let event = env
        .create_string("abort")
        .map_err(|e| invalid(format!("signal: {e}")))?;
    let mut once = env
        .create_object()
        .map_err(|e| invalid(format!("signal: {e}")))?;
    once.set_named_property("once", true)
        .map_err(|e| invalid(format!("signal: {e}")))?;
    add.call(
        Some(&sig),
        &[
            event.into_unknown(),
            listener.into_unknown(),
            once.into_unknown(),
        ],
    )
    .map_err(|e| invalid(format!("signal.addEventListener: {e}")))?;
    Ok(stop)
}

/// Send the file at `path` over `fd` (a connected TCP socket) to an opsel
/// receiver; resolves to the report once the receiver confirmed every byte
/// and its digest. `spec`: `{cca, hash: "xxh3"|"blake3", offset, resume,
/// name, streams, timeS, intervalS, key, ops}`, every field optional; `ops`
/// (`{model, pattern, steadyS, initialCca, gate, gateThreshold, rtt, leadIn,
/// adaptive, earlyExit, earlyConfidence, cycles, extendBelow, jitter, seed,
/// policy, dps}`, `{}` for every default) lets OPS choose the CCA, and the
/// report's `ops` lists the decisions and the CCAs used. `signal`: an
/// `AbortSignal`; aborting it ends the sending early (the report's
/// `driver.end` is "stopped", the receiver keeps a verified prefix).
#[napi(ts_return_type = "Promise<Record<string, any>>")]
pub fn send_file(
    env: Env,
    fd: i32,
    path: String,
    #[napi(ts_arg_type = "Record<string, any> | string | null")] spec: Option<serde_json::Value>,
    #[napi(ts_arg_type = "AbortSignal")] signal: Option<JsObject>,
) -> napi::Result<AsyncTask<Transfer>, Code> {
    guard(|| {
        let spec: SendSpec = core_value_or_default(spec, "send spec")?;
        dup(fd)?;
        let stop = stop_on_abort(&env, signal)?;
        Ok(AsyncTask::new(Transfer(Some(Job::Send(
            fd,
            path,
            Box::new(spec),
            stop,
        )))))
    })
}

/// Receive one transfer into `path` on `fd` (a listening TCP socket; the
/// sender's control and data connections arrive there); resolves to the
/// report after the first verified transfer. `spec`: `{force, append,
/// maxSize, handshakeS, idleS, acceptTimeoutS, key}`, every field optional.
#[napi(ts_return_type = "Promise<Record<string, any>>")]
pub fn recv_file(
    fd: i32,
    path: String,
    #[napi(ts_arg_type = "Record<string, any> | string")] spec: Option<serde_json::Value>,
) -> napi::Result<AsyncTask<Transfer>, Code> {
    guard(|| {
        let spec: RecvSpec = core_value_or_default(spec, "receive spec")?;
        // Listening before the Promise is returned: the task runs later on the
        // libuv pool, and a sender may connect as soon as this call returns.
        opsel_transfer::recv::listen(&TcpListener::from(dup(fd)?)).map_err(to_js)?;
        Ok(AsyncTask::new(Transfer(Some(Job::Recv(fd, path, spec)))))
    })
}
