//! What the test proxies share: a listener served on a thread and runtime of its own (the proxy
//! serves while the test blocks on a child process), each connection handed to `serve`, until
//! the sender returned is dropped or sent on.

use std::future::Future;

use tokio::net::{TcpListener, TcpStream};

use crate::{Error, Result};

/// Serves `listener` on a thread of its own, each connection by `serve`; stops when the returned
/// sender is sent on or dropped. `what` names the proxy in an error.
pub(crate) fn serve_on_thread<F, Fut>(
    listener: std::net::TcpListener,
    what: &str,
    serve: F,
) -> Result<tokio::sync::oneshot::Sender<()>>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io(format!("start the {what}'s runtime"), e))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            let accept = async {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(serve(client));
                }
            };
            tokio::select! {
                () = accept => {}
                _ = stopped => {}
            }
        });
    });
    Ok(stop)
}
