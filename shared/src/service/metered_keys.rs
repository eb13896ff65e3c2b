//! The key service with every call counted and timed: the app's key service once the app
//! reports to a [`Metrics`] (`App::measured`). It passes each call through unchanged and
//! reports its backend, operation, outcome and duration; it decides nothing.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use zeroize::Zeroizing;

use crate::ports::{
    key_backend, DataKey, KeyCall, KeyContext, KeyError, KeyOpener, KeyService, Metrics, WrappedKey,
};

/// `inner`, measured into `metrics`.
pub struct MeteredKeys {
    inner: Arc<dyn KeyService>,
    metrics: Arc<dyn Metrics>,
    /// The label of calls on the wrapping service, known before any key id comes back.
    wrapping: &'static str,
}

impl MeteredKeys {
    pub fn new(inner: Arc<dyn KeyService>, metrics: Arc<dyn Metrics>) -> Self {
        let wrapping = label(inner.wrapping_backend().unwrap_or_default());
        Self {
            inner,
            metrics,
            wrapping,
        }
    }

    fn report<T>(
        &self,
        backend: &'static str,
        operation: &'static str,
        started: Instant,
        result: &Result<T, KeyError>,
    ) {
        self.metrics.key_call(&KeyCall {
            backend,
            operation,
            ok: result.is_ok(),
            seconds: started.elapsed().as_secs_f64(),
        });
    }
}

/// A backend's label from a closed set, so a key id never becomes one.
fn label(backend: &str) -> &'static str {
    match backend {
        "platform" => "platform",
        "kms" => "kms",
        "transit" => "transit",
        _ => "other",
    }
}

#[async_trait]
impl KeyOpener for MeteredKeys {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        let started = Instant::now();
        let result = self.inner.unwrap_key(key_id, wrapped, context).await;
        self.report(label(key_backend(key_id)), "unwrap", started, &result);
        result
    }
}

#[async_trait]
impl KeyService for MeteredKeys {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        let started = Instant::now();
        let result = self.inner.data_key(context).await;
        self.report(self.wrapping, "data_key", started, &result);
        result
    }

    fn wrapping_backend(&self) -> Option<&str> {
        self.inner.wrapping_backend()
    }

    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError> {
        let started = Instant::now();
        let result = self.inner.current_key_id(context).await;
        self.report(self.wrapping, "current_key", started, &result);
        result
    }

    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let started = Instant::now();
        let result = self.inner.wrap_key(plaintext, context).await;
        self.report(self.wrapping, "wrap", started, &result);
        result
    }

    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let started = Instant::now();
        let result = self.inner.rewrap_key(key_id, wrapped, context).await;
        self.report(label(key_backend(key_id)), "rewrap", started, &result);
        result
    }
}
