import CourierCore
import CourierJSON
import CourierPipeline
import CourierTransport
import Foundation

extension HTTPSessionManager {
    /// Opens a WebSocket to `path`, resolved against the base URL: `"chat"` under
    /// `https://api.example.com/v1/` (or `wss://api.example.com/v1/`) is
    /// `wss://api.example.com/v1/chat`; an absolute `ws://` or `wss://` URL (or http/https)
    /// is taken as is.
    ///
    /// The handshake goes through the session as a `GET` does: the session's headers and
    /// `headers`, `parameters` in the query, the interceptors and ``adapt(_:)``, the session's
    /// cookies for the URL (and the `Set-Cookie` of the answer stored), its proxy (through a
    /// `CONNECT` tunnel), TLS trust, pins and client certificate. A credential for the origin
    /// (the call's, the URL's user info, or the session's store) is sent as Basic
    /// authentication: the handshake cannot answer a challenge. Returns when the server has
    /// answered `101 Switching Protocols`.
    ///
    /// - Parameters:
    ///   - path: a path under the base URL, or an absolute ws, wss, http or https URL.
    ///   - protocols: subprotocols to offer, in order of preference; ``WebSocket/subprotocol``
    ///     is the one the server chose.
    ///   - parameters: encoded into the query, as a `GET`'s are.
    ///   - headers: header fields for the handshake, after the session's.
    ///   - options: the handshake's timeout (`RequestOptions.requestTimeout`: the connection
    ///     and the handshake together), cookies, credential and interceptors.
    ///   - webSocketOptions: pings, limits and the close timeout of the open WebSocket.
    /// - Throws: `CourierError.webSocketHandshakeFailed` when the server does not upgrade
    ///   (with its response), the connection errors of any request (`cannotConnect`, `tls`,
    ///   `timedOut`...), `unsupportedInBackgroundSession` in a background session.
    public nonisolated func webSocket(
        _ path: String, protocols: [String] = [], parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), webSocketOptions: WebSocketOptions = WebSocketOptions()
    ) async throws -> WebSocket {
        if background != nil {
            throw CourierError.unsupportedInBackgroundSession(
                .init(message: "A background session runs downloads and uploads from files only, not WebSockets"))
        }
        // A session that finishes its tasks (or whose service shuts it down) opens no more.
        if let refusal = tasksInFlight.refusal(of: .get, path) { throw refusal }
        for name in protocols where name.isEmpty || !name.utf8.allSatisfy(Self.isTokenByte) {
            throw CourierError.invalidHeader(.init(message: "'\(name)' is not a valid WebSocket subprotocol name"))
        }
        guard webSocketOptions.maximumMessageSize > 0, webSocketOptions.bufferedMessageLimit > 0 else {
            throw CourierError.invalidURL(
                .init(message: "A WebSocket's maximumMessageSize and bufferedMessageLimit must be positive"))
        }
        // A ws or wss base URL: the path resolved against it here (requests resolve against
        // http and https ones).
        var target = path
        if let baseURL, ["ws", "wss"].contains(baseURL.scheme?.lowercased() ?? ""), !path.contains("://") {
            target = URL(string: path, relativeTo: baseURL)?.absoluteString ?? path
        }
        let prepared = try prepare(
            Call(
                method: .get, path: Self.httpForm(ofWebSocketPath: target), parameters: parameters,
                headers: headers, options: options))
        var settings = WebSocketParameters()
        settings.protocols = protocols
        settings.maximumMessageSize = webSocketOptions.maximumMessageSize
        settings.maximumTotalSize = webSocketOptions.maximumTotalSize
        settings.pingInterval = webSocketOptions.pingInterval
        settings.closeTimeout = webSocketOptions.closeTimeout
        settings.receiveQueueLimit = webSocketOptions.bufferedMessageLimit
        settings.offersCompression = webSocketOptions.compression
        settings.openTimeout = options.requestTimeout ?? pipeline.transferOptions.idleTimeout
        let (channel, opening) = try await pipeline.openWebSocket(prepared, hooks: self, parameters: settings)
        return WebSocket(channel: channel, opening: opening, manager: self)
    }

    /// `ws://` and `wss://` written as the http and https URLs of their handshake.
    nonisolated static func httpForm(ofWebSocketPath path: String) -> String {
        let lower = path.prefix(6).lowercased()
        if lower.hasPrefix("ws://") { return "http://" + path.dropFirst(5) }
        if lower.hasPrefix("wss://") { return "https://" + path.dropFirst(6) }
        return path
    }

    /// RFC 9110's `tchar`: what a subprotocol name is made of.
    private nonisolated static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
