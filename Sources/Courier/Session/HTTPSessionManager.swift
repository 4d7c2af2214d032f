@_spi(CourierInternals) import CourierCore
import CourierEngine
import CourierJSON
import CourierPipeline
import CourierSerialization
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes
import Logging

/// An HTTP client for one API: a base URL, a session configuration, request and response
/// serializers, and hooks that subclasses override.
///
/// Subclass it as your app's shared API client, with state of its own:
///
/// ```swift
/// final class ExampleAPI: HTTPSessionManager {
///     static let shared = ExampleAPI(baseURL: URL(string: "https://api.example.com/v1/")!)
///     var token: String?
///
///     override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
///         var request = request
///         if let token { request.headerFields[.authorization] = "Bearer \(token)" }
///         return request
///     }
/// }
/// ```
///
/// The class is isolated to ``HTTPSessionActor``, so subclass state is checked by the compiler.
/// The request methods are `nonisolated`: parameter encoding, the transfer and response
/// decoding run off the actor, which only runs the ``adapt(_:)`` and ``process(_:)`` hooks.
/// The serializer and header properties can be set from any context.
///
/// Each manager owns its engines (``HTTPSessionConfiguration/engineCount``, one per core by
/// default): each a libcurl multi handle on a thread of its own, with its connection pool;
/// reuse one manager for many requests. The threads end when the manager is released and its
/// last request has ended (each request holds the manager), or at `invalidateAndCancel()`.
@HTTPSessionActor
open class HTTPSessionManager {
    /// The URL that relative paths resolve against (with a trailing slash added when missing).
    public nonisolated let baseURL: URL?
    /// `baseURL` as plain relative paths resolve against it, without Foundation.
    nonisolated let base: BaseURL?
    /// The configuration the manager was created with.
    public nonisolated let configuration: HTTPSessionConfiguration
    /// Where the manager logs (at `debug` and `trace` level).
    public nonisolated let logger: Logger

    /// What sends the requests: the libcurl engine, or the configuration's transport.
    nonisolated let transport: any Transport
    /// Interceptors, the HTTP cache, credentials, the transport, monitors.
    nonisolated let pipeline: RequestPipeline
    /// The serializers, decoder, encoder and header fields, settable from any context.
    nonisolated let settings: Locked<Settings>
    /// False for `HTTPSessionManager` itself, whose hooks return their input unchanged: its
    /// requests skip the two hops to the session actor. Subclasses always run the hooks.
    package nonisolated let runsHooks: Bool

    nonisolated let transferOptions: TransferOptions
    /// The session's HTTP cache: inspect or empty it. Nil when the configuration has none
    /// (`cacheCapacity` 0).
    public nonisolated let cache: HTTPCache?
    /// The reachability of the base URL's host, as AFNetworking's `reachabilityManager`: its
    /// `statuses` say whether the system has a route to it, and through which interface, each
    /// time that changes. Nil without a base URL.
    ///
    /// ```swift
    /// for await status in api.reachability!.statuses where !status.isReachable {
    ///     showOfflineBanner()
    /// }
    /// ```
    public nonisolated var reachability: ReachabilityMonitor? {
        baseURL.flatMap { ReachabilityMonitor(url: $0) }
    }
    /// The session's credentials, by protection space (memory only).
    public nonisolated let credentials = CredentialStore()
    /// The tasks and requests running now (``tasks``).
    nonisolated let tasksInFlight = TaskRegistry()
    /// The identifier's lock, the task journal and the event hub of a background session.
    nonisolated let background: BackgroundSession?
    /// Which proxy requests go through, for the proxy's credentials.
    nonisolated let proxies: ProxySettings
    /// What is wrong with the configuration (a malformed pin): every request fails with it.
    nonisolated let configurationError: CourierError?

    struct Settings {
        var requestSerializer: any RequestSerializer = HTTPRequestSerializer()
        var responseSerializer: any ResponseSerializer<JSON> = JSONResponseSerializer()
        var additionalHeaders: [String: String] {
            didSet { cachedSessionFields = nil }
        }
        var decoder = JSONDecoder()
        var encoder = JSONEncoder()
        var challengeHandler: (@Sendable (AuthenticationChallenge) async -> Credential?)?
        /// The default headers plus `additionalHeaders`, validated once per change, and the
        /// transport's form of them (the engine's libcurl header list), shared by every request
        /// that sends just those.
        private var cachedSessionFields: (fields: HTTPFields, shared: (any Sendable)?)?
        /// The session asks for compressed responses (the header list names the encodings).
        let acceptsCompressedResponses: Bool

        init(additionalHeaders: [String: String], acceptsCompressedResponses: Bool) {
            self.additionalHeaders = additionalHeaders
            self.acceptsCompressedResponses = acceptsCompressedResponses
        }

        mutating func sessionFields(
            transport: any Transport
        ) throws(CourierError) -> (fields: HTTPFields, shared: (any Sendable)?) {
            if let cachedSessionFields { return cachedSessionFields }
            var fields = HTTPFields()
            fields[.userAgent] = RequestBuilding.userAgent
            fields[.acceptLanguage] = RequestBuilding.acceptLanguage
            try RequestBuilding.apply(additionalHeaders, to: &fields)
            let cached = (
                fields, transport.sharedHeaders(for: fields, acceptsCompressedResponses: acceptsCompressedResponses)
            )
            cachedSessionFields = cached
            return cached
        }
    }

    /// Creates a manager. Paths given to its methods resolve against `baseURL`, which gets a
    /// trailing slash when its path lacks one (`http://example.com/v1` acts as `.../v1/`).
    public nonisolated init(
        baseURL: URL? = nil, configuration: HTTPSessionConfiguration = .default,
        logger: Logger = Logger(label: "courier")
    ) {
        self.baseURL = RequestBuilding.normalizedBaseURL(baseURL)
        self.base = BaseURL(self.baseURL)
        self.configuration = configuration
        self.logger = logger
        self.settings = Locked(
            Settings(
                additionalHeaders: configuration.additionalHeaders,
                acceptsCompressedResponses: configuration.acceptsCompressedResponses))
        self.runsHooks = type(of: self) != HTTPSessionManager.self
        let environment = configuration.trustsEnvironment ? ProcessInfo.processInfo.environment : [:]
        let proxies = ProxySettings(configured: configuration.proxy, environment: environment)
        var transferOptions = configuration.transferOptions
        transferOptions.bypassesProxies = proxies.isEmpty
        transferOptions.ignoresNoProxyVariable = !configuration.trustsEnvironment
        transferOptions.environmentCAFile = environment["SSL_CERT_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        transferOptions.environmentCADirectory = environment["SSL_CERT_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        self.transferOptions = transferOptions
        self.proxies = proxies
        let storage = configuration.resolvedStorageDirectory  // reads the environment: once
        self.cache =
            configuration.cacheCapacity > 0
            ? HTTPCache(
                directory: storage?.appendingPathComponent("cache"),
                capacity: configuration.cacheCapacity, logger: logger) : nil
        if case .background(let identifier) = configuration.kind, let directory = storage {
            self.background = BackgroundSession(identifier: identifier, directory: directory)
        } else {
            self.background = nil
        }
        var engines = min(max(configuration.engineCount, 1), 64)
        if case .background = configuration.kind { engines = 1 }
        let transport: any Transport =
            configuration.transport?.base
            ?? EngineGroup(
                engineCount: engines,
                limits: .init(
                    maximumConnectionsPerHost: configuration.maximumConnectionsPerHost,
                    maximumTotalConnections: configuration.maximumConnections,
                    maximumStreamsPerConnection: configuration.maximumStreamsPerConnection,
                    maximumConcurrentTransfers: configuration.maximumConcurrentTasks ?? 0,
                    maximumBytesPerSecond: configuration.maximumBytesPerSecond,
                    cookies: configuration.handlesCookies
                        ? .init(
                            jar: storage?.appendingPathComponent("cookies.txt"),
                            policy: configuration.cookieAcceptPolicy, logger: logger) : nil,
                    socket: configuration.socket))
        self.transport = transport
        var monitors = configuration.eventMonitors
        if logger.logLevel <= .debug { monitors.append(LoggingMonitor(logger: logger)) }
        self.pipeline = RequestPipeline(
            transport: transport, cache: cache, cachePolicy: configuration.cachePolicy, credentials: credentials,
            proxies: proxies, transferOptions: transferOptions, interceptors: configuration.interceptors,
            monitors: monitors,
            hsts: configuration.usesHSTS ? HSTSStore(file: storage?.appendingPathComponent("hsts.json")) : nil,
            altServices: AltServiceStore(file: storage?.appendingPathComponent("alt-svc.json")),
            telemetry: SessionTelemetry(
                tracer: configuration.tracer, metricsFactory: configuration.metricsFactory),
            addsCacheStatusField: configuration.addsCacheStatusField,
            coalescesRequests: configuration.coalescesRequests)
        do {
            try configuration.validate()
            self.configurationError = nil
        } catch {
            logger.error("\(error.context.message)")
            self.configurationError = error
        }
        if !configuration.tls.verifiesCertificates {
            logger.warning(
                "TLS certificate verification is off: anyone between this process and the server can read and change every request and response"
            )
        }
    }

    deinit {
        transport.shutdown()
        background?.close()
    }

    /// Cancels every request and task of this manager (they throw `CancellationError`), closes
    /// its connections and ends its engine thread. Requests made afterwards fail at once with
    /// `CancellationError`.
    ///
    /// Releasing the manager is not the same: each request and task holds the manager until it
    /// ends, so the requests running when the last other reference goes finish first; then the
    /// manager closes its connections and ends its engine thread.
    ///
    /// A background session's tasks are cancelled for good (their journal entries and partial
    /// files go), its ``events`` streams end, and its identifier is free for a new manager.
    public nonisolated func invalidateAndCancel() {
        background?.cancelAll()
        transport.shutdown()
        background?.close()
    }

    /// The session's cookies (empty, and ignored, when the configuration does not handle them).
    public nonisolated var cookies: CookieStore { CookieStore(host: transport) }

    // MARK: - Settings (any context)

    /// Encodes parameters into requests. Default `HTTPRequestSerializer` (query string for
    /// GET, HEAD and DELETE; form body otherwise).
    public nonisolated var requestSerializer: any RequestSerializer {
        get { settings.withLock { $0.requestSerializer } }
        set { settings.withLock { $0.requestSerializer = newValue } }
    }

    /// Turns responses into `JSON` for the methods that return JSON. Default
    /// `JSONResponseSerializer`.
    public nonisolated var responseSerializer: any ResponseSerializer<JSON> {
        get { settings.withLock { $0.responseSerializer } }
        set { settings.withLock { $0.responseSerializer = newValue } }
    }

    /// Headers sent with every request, after the defaults (`User-Agent`, `Accept-Language`)
    /// and before each call's own `headers`. Starts as the configuration's `additionalHeaders`.
    public nonisolated var additionalHeaders: [String: String] {
        get { settings.withLock { $0.additionalHeaders } }
        set { settings.withLock { $0.additionalHeaders = newValue } }
    }

    /// Decodes responses for the methods that take `as: SomeDecodable.self`.
    public nonisolated var decoder: JSONDecoder {
        get { settings.withLock { $0.decoder } }
        set { settings.withLock { $0.decoder = newValue } }
    }

    /// Answers authentication challenges (401, 407) the credential store cannot, unless a
    /// subclass overrides ``credential(for:)``. Asked once per request; nil gives up.
    public nonisolated var challengeHandler: (@Sendable (AuthenticationChallenge) async -> Credential?)? {
        get { settings.withLock { $0.challengeHandler } }
        set { settings.withLock { $0.challengeHandler = newValue } }
    }

    /// Encodes `Encodable` parameters (to JSON first, then by the request serializer).
    public nonisolated var encoder: JSONEncoder {
        get { settings.withLock { $0.encoder } }
        set { settings.withLock { $0.encoder = newValue } }
    }

    // MARK: - Hooks for subclasses

    /// Called for every request of this manager, after parameters were encoded and before it
    /// is sent. Override to add authentication, sign, or log. Throwing fails the request.
    open func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
        request
    }

    /// Called for every response of this manager before the response serializer. Override to
    /// validate (throw to fail the request) or to transform the response.
    open func process(_ response: RawResponse) async throws -> RawResponse {
        response
    }

    /// Called when a server asks for authentication (401, or 407 from a proxy) and the
    /// session has no credential for it. The default asks ``challengeHandler``. Return nil to
    /// give up (the 401 response then goes to the response serializer). A credential with
    /// `.forSession` persistence is kept for later requests to the same protection space.
    open func credential(for challenge: AuthenticationChallenge) async -> Credential? {
        await challengeHandler?(challenge)
    }

    /// The serializer for results of type `Value`: the manager's ``responseSerializer`` for
    /// `JSON`, a `DecodableResponseSerializer` with the manager's ``decoder`` otherwise.
    nonisolated func serializer<Value: Decodable & Sendable>(for type: Value.Type) -> any ResponseSerializer<Value> {
        if Value.self == JSON.self {
            return responseSerializer as! any ResponseSerializer<Value>
        }
        return DecodableResponseSerializer<Value>(decoder: decoder, validation: .defaultJSON)
    }

    /// Converts `Encodable` parameters to `JSON` with the manager's ``encoder``.
    nonisolated func json(from parameters: some Encodable & Sendable) throws(CourierError) -> JSON {
        do {
            return try JSON(encoding: parameters, encoder: encoder)
        } catch {
            throw .serializationFailed(
                .init(message: "Cannot encode parameters of type \(type(of: parameters)): \(error)"))
        }
    }
}
