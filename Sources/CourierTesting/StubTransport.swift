import Courier
@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// A transport for tests: answers requests with canned responses, records every request it is
/// given with its body, and injects failures, delays, chunked bodies and progress, without a
/// server.
///
/// Everything above the transport runs as with the libcurl engine: request and response
/// serializers, validation, interceptors, `adapt(_:)` and `process(_:)`, redirects (followed
/// by the same rules), the HTTP cache, authentication challenges, downloads, byte streams,
/// progress and task control. Credentials are sent as Basic authentication to their origin
/// (a proxy's, when the session has a proxy, in `Proxy-Authorization`). Cookies and timeouts
/// are the engine's part: a session on a stub keeps no cookies, and a request records the
/// timeouts it would have (``RecordedRequest/requestTimeout``) but never times out.
///
/// ```swift
/// let stub = StubTransport()
/// stub.stub(.get, "/v1/users/1", with: .json(#"{"id": 1, "name": "Ada"}"#))
/// var configuration = HTTPSessionConfiguration.ephemeral
/// configuration.transport = stub.transport
/// let api = ExampleAPI(baseURL: URL(string: "https://api.example.com/v1/"), configuration: configuration)
/// let user = try await api.GET("users/1", as: User.self)
/// #expect(stub.requests.first?.request.headerFields[.authorization] == "Bearer token")
/// ```
///
/// A request that no stub answers fails with `CourierError.transport` ("No stub answers
/// GET https://..."). Stubs added later are tried first.
public final class StubTransport: Sendable {
    private struct Route: Sendable {
        var matches: @Sendable (RecordedRequest) -> Bool
        var respond: @Sendable (RecordedRequest) async throws -> StubResponse
    }

    struct WebSocketRoute: Sendable {
        var path: String
        var subprotocol: String?
        var handler: @Sendable (StubWebSocketPeer) async throws -> Void
    }

    private struct State {
        var routes: [Route] = []
        var webSocketRoutes: [WebSocketRoute] = []
        var recorded: [RecordedRequest] = []
    }

    private let state = Locked(State())

    /// A stub with no routes.
    public init() {}

    /// The transport to set as `HTTPSessionConfiguration.transport`.
    public var transport: HTTPTransport { HTTPTransport(Engine(stub: self)) }

    /// Answers requests with `method` to `path` with `responses`, one per request, the last one
    /// again for every request after it (so `[.status(.serviceUnavailable), .json("{}")]` fails
    /// once, then succeeds).
    ///
    /// A `path` that starts with `/` must equal the request's path (without the query);
    /// otherwise the request's path must end with `/` and `path` (`"users"` matches
    /// `/v1/users`).
    public func stub(_ method: HTTPRequest.Method, _ path: String, with responses: StubResponse...) {
        precondition(!responses.isEmpty, "stub(_:_:with:) needs at least one response")
        let next = Locked(0)
        let routePath = path
        stub(
            where: { $0.request.method == method && Self.path($0.path, matches: routePath) },
            respond: { _ in
                let index = next.withLock { index in
                    defer { index += 1 }
                    return min(index, responses.count - 1)
                }
                return responses[index]
            })
    }

    /// Answers the requests `matches` picks with what `respond` returns; an error `respond`
    /// throws fails the request with it.
    public func stub(
        where matches: @escaping @Sendable (RecordedRequest) -> Bool,
        respond: @escaping @Sendable (RecordedRequest) async throws -> StubResponse
    ) {
        state.withLock { $0.routes.insert(Route(matches: matches, respond: respond), at: 0) }
    }

    /// Plays the server for WebSockets to `path` (matched as ``stub(_:_:with:)`` matches):
    /// the handshake succeeds (choosing `subprotocol`, which fails the handshake unless the
    /// client offered it), and `handler` runs with the server's end of the WebSocket: what the
    /// client sends arrives in ``StubWebSocketPeer/messages``, and what the handler sends
    /// arrives in the client's `WebSocket.messages`. When the handler returns, the server
    /// closes with 1000 (unless it closed already); when it throws, the connection drops
    /// (the client sees `CourierError.connectionLost`). Handshakes are recorded in
    /// ``requests``; a WebSocket no stub answers fails with
    /// `CourierError.webSocketHandshakeFailed` and a 404.
    ///
    /// ```swift
    /// stub.stubWebSocket("/chat") { peer in
    ///     for try await message in peer.messages { try await peer.send(message) }  // echo
    /// }
    /// ```
    public func stubWebSocket(
        _ path: String, subprotocol: String? = nil,
        handler: @escaping @Sendable (StubWebSocketPeer) async throws -> Void
    ) {
        state.withLock {
            $0.webSocketRoutes.insert(WebSocketRoute(path: path, subprotocol: subprotocol, handler: handler), at: 0)
        }
    }

    /// Records a WebSocket's handshake and finds its route.
    func webSocketRoute(for request: RecordedRequest) -> WebSocketRoute? {
        state.withLock { state in
            state.recorded.append(request)
            return state.webSocketRoutes.first { Self.path(request.path, matches: $0.path) }
        }
    }

    /// Every request given to the transport so far, in order: each hop of a redirect, and each
    /// attempt of a retried request, is one. The bodies were read as the server would.
    public var requests: [RecordedRequest] { state.withLock { $0.recorded } }

    /// Forgets the recorded requests (the routes stay).
    public func clearRequests() {
        state.withLock { $0.recorded.removeAll() }
    }

    static func path(_ requestPath: String, matches routePath: String) -> Bool {
        routePath.hasPrefix("/") ? requestPath == routePath : requestPath.hasSuffix("/" + routePath)
    }

    /// Records `request` and finds its answer.
    func response(for request: RecordedRequest) async throws -> StubResponse {
        let route = state.withLock { state -> Route? in
            state.recorded.append(request)
            return state.routes.first { $0.matches(request) }
        }
        guard let route else {
            throw CourierError.transport(
                .init(url: request.url, message: "No stub answers \(request.request.method.rawValue) \(request.url)"))
        }
        return try await route.respond(request)
    }

    /// The `Transport` the session talks to; the stub's routes and records are shared by every
    /// session made with `transport`.
    final class Engine: Transport {
        let stub: StubTransport
        private let transfers = Locked<[ObjectIdentifier: StubTransfer]>([:])
        private let isShutDown = Locked(false)

        init(stub: StubTransport) {
            self.stub = stub
        }

        func sharedHeaders(for fields: HTTPFields, acceptsCompressedResponses: Bool) -> (any Sendable)? {
            nil
        }

        func makeTransfer(
            _ request: consuming TransferRequest, reporters: TransferReporters?, sharedHeaders: (any Sendable)?,
            sink: (any ResponseSink)?, maximumBytesPerSecond: Int64?
        ) -> any TransportTransfer {
            let sink = sink ?? MemorySink(limit: request.sharedOptions.value.maximumResponseSize)
            let transfer = StubTransfer(request: request, stub: stub, reporters: reporters, sink: sink)
            let shutDown = isShutDown.withLock { isShutDown in
                if !isShutDown { transfers.withLock { $0[ObjectIdentifier(transfer)] = transfer } }
                return isShutDown
            }
            if shutDown {
                transfer.cancel()
            } else {
                let id = ObjectIdentifier(transfer)
                transfer.onFinish = { [weak self] in
                    _ = self?.transfers.withLock { $0.removeValue(forKey: id) }
                }
            }
            return transfer
        }

        func makeWebSocket(_ request: TransferRequest, parameters: WebSocketParameters) -> any WebSocketChannel {
            StubWebSocketChannel(request: request, parameters: parameters, stub: stub)
        }

        func shutdown() {
            isShutDown.withLock { $0 = true }
            let running = transfers.withLock { transfers in
                defer { transfers.removeAll() }
                return Array(transfers.values)
            }
            for transfer in running { transfer.cancel() }
        }

        func withCookieJar<Value: Sendable>(_ work: @escaping @Sendable ((any CookieJar)?) -> Value) async -> Value {
            work(nil)
        }

        func cookieHeader(for urlString: String) -> String? { nil }
    }
}

/// A request as a ``StubTransport`` received it.
public struct RecordedRequest: Sendable {
    /// The request head as sent: after interceptors and `adapt(_:)`, with the validators the
    /// HTTP cache added; for a redirect hop, the head the redirect made.
    public var request: HTTPRequest
    /// The absolute URL.
    public var url: URL
    /// The body as it would go on the wire (gzip-compressed if the request asked for it); nil
    /// when the request has none.
    public var body: Data?
    /// The request timeout the engine would apply: no bytes for this long fails the request
    /// with `CourierError.timedOut` (the configuration's `requestTimeout`, or the request's own
    /// from `RequestOptions`). The stub itself does not time out.
    public var requestTimeout: Duration = .seconds(60)
    /// The resource timeout the engine would apply: the longest the whole transfer may take,
    /// redirects included (the configuration's `resourceTimeout`, or the request's own); nil
    /// for no limit.
    public var resourceTimeout: Duration?

    /// The URL's path, without the query.
    public var path: String { url.path(percentEncoded: true).isEmpty ? "/" : url.path(percentEncoded: true) }

    /// The URL's query items.
    public var queryItems: [URLQueryItem] {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
    }

    /// The body as UTF-8 text.
    public var bodyText: String? { body.flatMap { String(data: $0, encoding: .utf8) } }
}
