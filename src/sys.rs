//! The operating system's part: how a stop is asked for. (More OS-specific calls live in
//! `fsio` until they move here.)

/// Resolves when the user or the client asks the process to stop: SIGINT or SIGTERM on Unix,
/// Ctrl-C elsewhere. Never resolves if no handler can be installed.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) =
            (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
