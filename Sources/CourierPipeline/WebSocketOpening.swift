import CourierTransport
import Foundation

extension RequestPipeline {
    /// Opens a WebSocket for `prepared` (a `GET` of the http or https URL standing for the ws
    /// or wss one): the interceptors and hooks adapt it as any request, an http URL of a host
    /// known for `Strict-Transport-Security` becomes https, the call's or the store's
    /// credential for the origin goes as Basic authentication (a handshake cannot answer a
    /// challenge), and the proxy's credential to the proxy. Monitors hear `created`,
    /// `adapted`, `attemptStarted`, then `webSocketOpened` or `failed`, and later
    /// `webSocketClosed`. Not retried: an open that fails throws.
    package func openWebSocket(
        _ prepared: PreparedRequest, hooks: any SessionHooks, parameters: WebSocketParameters
    ) async throws -> (channel: any WebSocketChannel, opening: WebSocketOpening) {
        let requestID = nextRequestID()
        let observers = monitors.map { RequestObservers(requestID: requestID, monitors: $0, telemetry: nil) }
        observers?.created(prepared.head)
        let context = RequestContext(requestID: requestID, attempt: 1, firstAttemptStarted: .now)
        var adapted = prepared.head
        do {
            adapted = try await adapt(prepared, hooks: hooks, context: context, chain: prepared.call.options.chain)
            let (head, urlString, credentials) = try addressed(adapted, for: prepared)
            adapted = head
            observers?.adapted(adapted, attempt: 1)
            if let credential = credentials.server.credential(for: adapted.url),
                adapted.headerFields[.authorization] == nil
            {
                let token = Data("\(credential.user):\(credential.password)".utf8).base64EncodedString()
                adapted.headerFields[.authorization] = "Basic \(token)"
            }
            var request = TransferRequest(
                head: adapted, urlString: urlString, body: nil, options: options(for: prepared.call))
            request.proxyCredential = credentials.proxy
            var parameters = parameters
            if let observers {
                let handshake = adapted
                parameters.onEnd = { result, closure in
                    var error: (any Error)?
                    if case .failure(let failure) = result { error = failure }
                    observers.webSocketClosed(handshake, closure: closure, error: error)
                }
            }
            let channel = transport.makeWebSocket(request, parameters: parameters)
            observers?.attemptStarted(adapted, attempt: 1)
            let opening = try await channel.open()
            observers?.webSocketOpened(opening)
            return (channel, opening)
        } catch {
            await observers?.failed(adapted, error, attempts: 1, cancelled: error is CancellationError)
            throw error
        }
    }
}
