import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// One transfer: its lifecycle (shared by the caller's side and the engine thread) and the
/// state libcurl's callbacks fill in (engine thread only).
///
/// `@unchecked Sendable` because it is shared between threads by design: `lifecycle` (a
/// `Locked`) guards the state machine, the result and the waiters; every other `var` is touched
/// only on the engine thread, between `CurlEngine.add` and `CurlEngine.detach`, and read by
/// nobody else until the result is published through `lifecycle`.
final class Transfer: @unchecked Sendable {
    private struct Lifecycle {
        var machine = TransferStateMachine()
        /// The result once published (a reference and an error: small enough to hold inline).
        var result: Result<TransferOutput, any Error>?
        var waiters = TransferWaiters()
        /// The request of the current hop once a redirect was followed (nil before): written
        /// on the engine thread, read by task lists on any thread. By reference: most transfers
        /// follow no redirect.
        var redirected: Redirected?
    }

    /// The request a redirect led to, by reference: most transfers follow none.
    private final class Redirected: Sendable {
        let request: HTTPRequest
        init(_ request: HTTPRequest) { self.request = request }
    }

    let engine: CurlEngine
    /// The URL the transfer was made for (its first hop).
    let requestURL: String
    /// Progress reporters, when somebody can watch them (task objects); nil for plain calls.
    let reporters: TransferReporters?
    private let lifecycle = Locked(Lifecycle())

    // MARK: Engine-thread state (`@EngineConfined`: checked in debug builds)

    /// The easy handle while the transfer is on the multi handle.
    @EngineConfined var easy: UnsafeMutableRawPointer?
    /// Where the engine's list of active transfers holds this one; -1 when it does not.
    @EngineConfined var activeIndex = -1
    /// The socket libcurl last asked the engine to watch for this transfer; -1 before.
    @EngineConfined var socket: Int32 = -1
    /// The handle last ran a plain transfer with the same options: only per-request options
    /// need setting (see `EasyHandlePool`).
    @EngineConfined var handleIsClean = false
    /// The current hop's server trust evaluation, when its TLS policy has an evaluator.
    @EngineConfined var trustContext: TrustContext?
    /// Takes the codings off the current response's body, when it has any Courier decodes.
    @EngineConfined var decoder: BodyDecoder?
    /// Bytes at the start of libcurl's next delivery that the decoder has taken already: when
    /// the sink refused decoded output, the callback answered "pause" after the decoder took
    /// the whole chunk, and libcurl hands the same chunk over again when the transfer goes on.
    @EngineConfined var redelivered = 0
    /// The hop is sent again with transfer codings handed on as they come
    /// (`CURLOPT_HTTP_TRANSFER_DECODING` off): its response had one libcurl cannot decode.
    @EngineConfined var passesTransferCodingsThrough = false
    /// The current head names a transfer coding libcurl cannot decode (from 8.5 it would fail
    /// at the body's first byte): the hop was ended at its head, to be sent again with
    /// transfer codings passed through (see `TransferOutcome`).
    @EngineConfined var unknownTransferCoding = false
    /// The request of the current hop (redirects change URL, method, body and some headers).
    /// Read in place: a wrapped property's getter would copy the whole request (a dozen
    /// references retained and released) for every field a callback reads.
    var current: TransferRequest {
        _read {
            EngineThread.check("a transfer's request")
            yield currentStorage
        }
        set {
            EngineThread.check("a transfer's request")
            currentStorage = newValue
            hop = HopSettings(newValue)
        }
    }
    /// `current`'s value (engine thread only, as `current` checks; so not checked for exclusive
    /// access at run time either, as `headStorage` is not).
    @exclusivity(unchecked) private var currentStorage: TransferRequest
    /// What the callbacks need of `current`, copied out so the hot path touches no strings.
    @EngineConfined package private(set) var hop: HopSettings
    /// `CURLOPT_URL` and `CURLOPT_HTTPHEADER` of the current hop, built on the caller's thread
    /// for the first hop (curl_slist_append needs no handle) and on the engine for redirects.
    @EngineConfined var prepared: PreparedHop
    /// libcurl's parse of `prepared.url` (`CURLOPT_CURLU`), held while the easy handle may read
    /// it: from `configure` until the engine detaches the transfer.
    @EngineConfined var parsedURL: ParsedURL?
    @EngineConfined var redirectCount = 0
    /// The current hop's response head as it arrives. Read and changed in place, without the
    /// runtime's exclusivity check (`headStorage` is only touched here, on the engine thread,
    /// which `EngineThread.check` asserts in debug builds): each header line changes it and
    /// each callback reads it, and a checked access costs a thread-local lookup each time.
    var head: RecordedHead {
        _read {
            EngineThread.check("a transfer's response head")
            yield headStorage
        }
        _modify {
            EngineThread.check("a transfer's response head")
            yield &headStorage
        }
    }
    @exclusivity(unchecked) private var headStorage = RecordedHead()
    /// The current hop is a redirect whose body is thrown away.
    @EngineConfined var discardingBody = false
    /// The hop's head is a 401 (or 407) that libcurl may answer by sending the request again
    /// with the credential it was given: its body is dropped and the sink waits for the next
    /// head; if none comes, the 401 is the answer (see `TransferOutcome`).
    @EngineConfined var awaitingAuthRetry = false
    /// Bytes of the redirect's body thrown away so far (see `redirectBodyLimit`).
    @EngineConfined var discardedBytes = 0
    /// The redirect's body was too long to read: the hop was ended early, on purpose, and its
    /// `CURLE_WRITE_ERROR` means "follow the redirect", not a failure.
    @EngineConfined var cutRedirectBody = false
    /// Where the body of the final response goes.
    let sink: ResponseSink
    @EngineConfined var sinkEnded = false
    /// The sink has bytes held back for the engine's next flush.
    @EngineConfined var flushScheduled = false
    /// Reads the request body of the current hop, when it is not sent from memory.
    @EngineConfined var bodyReader: BodyReader?
    /// Why the transfer is paused, and what libcurl was last told.
    @EngineConfined var pause = PauseState()
    @EngineConfined var appliedPauseMask: Int32 = 0
    /// This transfer's own bandwidth limit. libcurl's `CURLOPT_MAX_RECV_SPEED_LARGE` checks
    /// the rate only between reads of up to a hundred buffers, far too coarse on a fast link,
    /// so the callbacks enforce it with a token bucket, as they do the session's limit.
    @EngineConfined var bandwidth: BandwidthBucket?
    @EngineConfined var receivedBytes: Int64 = 0
    /// Coded body bytes given to the decoder this hop (for `maximumDecompressionRatio`).
    @EngineConfined var codedBytes: Int64 = 0
    @EngineConfined var sentBytes: Int64 = 0
    @EngineConfined var expectedBytes: Int64?
    /// The sink's bytes from before this response (a resumed download): progress starts there.
    @EngineConfined var progressOffset: Int64 = 0
    /// A failure found in a callback (e.g. the body grew past the limit), reported at the end.
    @EngineConfined var callbackFailure: CourierError?
    /// The redirect hops before the current one.
    @EngineConfined var earlierHops: [TransactionMetrics] = []
    /// The origin (`AltServiceStore.origin`) the current hop asked for HTTP/3 because it
    /// advertised it (`.http3WhenAdvertised`); nil when the hop did not.
    @EngineConfined var advertisedHTTP3Origin: String?
    /// libcurl's buffer for the message of a failure (`CURLOPT_ERRORBUFFER`), lent by the
    /// engine while the transfer holds an easy handle (`CurlEngine.add` to `detach`): a request
    /// makes and frees none of its own. Engine thread, checked as `head` is.
    var errorBuffer: UnsafeMutablePointer<CChar>? {
        get {
            EngineThread.check("a transfer's error buffer")
            return errorBufferStorage
        }
        set {
            EngineThread.check("a transfer's error buffer")
            errorBufferStorage = newValue
        }
    }
    @exclusivity(unchecked) private var errorBufferStorage: UnsafeMutablePointer<CChar>?
    /// The request of the first hop.
    let firstRequest: HTTPRequest
    /// When the call must be over (`TransferRequest.deadline`), on the engine's monotonic
    /// clock (nanoseconds); nil without one.
    let callDeadline: UInt64?
    /// The transfer waits in the session's queue for a place, with a deadline scheduled on
    /// its engine's timers.
    @EngineConfined var waitsForPlace = false
    /// The request of the current hop: the first, or the one the last redirect led to.
    var currentRequest: HTTPRequest { lifecycle.withLock { $0.redirected?.request } ?? firstRequest }

    /// Notes the request of the hop a redirect leads to. Engine thread.
    func noteRedirect(to request: HTTPRequest) {
        let redirected = Redirected(request)
        lifecycle.withLock { $0.redirected = redirected }
    }

    init(
        request: consuming TransferRequest, engine: CurlEngine, reporters: TransferReporters? = nil,
        sharedHeaders: HeaderList? = nil, sink: ResponseSink? = nil, maximumBytesPerSecond: Int64? = nil
    ) {
        if let sink {
            self.sink = sink
        } else {
            self.sink = MemorySink(limit: request.sharedOptions.value.maximumResponseSize)
        }
        self.bandwidth = maximumBytesPerSecond.map(BandwidthBucket.init(bytesPerSecond:))
        self.requestURL = request.urlString
        self.firstRequest = request.head
        self.callDeadline = request.deadline.map { deadline in
            // Milliseconds are fine enough, and a few years of them fit.
            let remaining = max(0, ContinuousClock.now.duration(to: deadline).milliseconds)
            return courier_monotonic_nanoseconds() + UInt64(min(remaining, 1 << 40)) * 1_000_000
        }
        self.hop = HopSettings(request)
        self.prepared = PreparedHop(request, sharedHeaders: sharedHeaders)
        // Last: the request moves in rather than being copied.
        self.currentStorage = request
        self.engine = engine
        self.reporters = reporters
    }

    // MARK: Caller side

    /// Hands the transfer to the engine unless it was cancelled or suspended first.
    func start() {
        let action = lifecycle.withLock { $0.machine.start() }
        if action == .enqueue { enqueue() }
    }

    private func enqueue() {
        if !engine.submitAdd(self) {
            cancel()  // the session is shutting down
        }
    }

    /// Cancels; waiters get `CancellationError` now. Idempotent, callable from any thread.
    func cancel() {
        let (action, waiters) = lifecycle.withLock { state -> (TransferStateMachine.CancelAction, TransferWaiters) in
            let action = state.machine.cancel()
            guard action != .none else { return (action, TransferWaiters()) }
            state.result = .failure(CancellationError())
            defer { state.waiters = TransferWaiters() }
            return (action, state.waiters)
        }
        guard action != .none else { return }
        waiters.resume(with: .failure(CancellationError()))
        reporters?.finish(succeeded: false)
        switch action {
        case .finishAndRemove: _ = engine.submit(.remove(self))
        case .finishAndWithdraw: _ = engine.submit(.withdraw(self))
        case .finish, .none: break
        }
    }

    /// Pauses a running transfer in both directions, or holds one that has not started.
    func suspend() {
        let action = lifecycle.withLock { $0.machine.suspend() }
        if action == .pause { _ = engine.submit(.applySuspension(self)) }
    }

    /// Undoes `suspend()`; starts the transfer if it was never started.
    func resume() {
        let action = lifecycle.withLock { $0.machine.resume() }
        switch action {
        case .enqueue: enqueue()
        case .unpause: _ = engine.submit(.applySuspension(self))
        case .none: break
        }
    }

    /// Sets this transfer's bandwidth limit, in bytes per second (nil: none).
    func setMaximumBytesPerSecond(_ rate: Int64?) {
        _ = engine.submit(.setRate(self, rate))
    }

    var isFinished: Bool { lifecycle.withLock { $0.machine.isFinished } }

    /// Whether the caller wants the running transfer paused now (the state machine's word,
    /// read when the engine applies it, so that the latest call wins).
    var isSuspendedWhileRunning: Bool { lifecycle.withLock { $0.machine.isSuspendedWhileRunning } }

    /// Waits for the result. When `cancelsWithCaller`, cancelling the awaiting Swift task cancels
    /// the transfer.
    func value(cancelsWithCaller: Bool = true) async throws -> TransferOutput {
        if cancelsWithCaller {
            return try await withTaskCancellationHandler {
                try await waitForResult()
            } onCancel: {
                self.cancel()
            }
        }
        return try await waitForResult()
    }

    /// The state machine resumes each waiter exactly once, which is what an unsafe
    /// continuation requires.
    private func waitForResult() async throws -> TransferOutput {
        try await withUnsafeThrowingContinuation { continuation in
            let ready = lifecycle.withLock { state -> Result<TransferOutput, any Error>? in
                if let published = state.result { return published }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    // MARK: Engine side

    func engineWillAdd() -> TransferStateMachine.AddAction {
        lifecycle.withLock { $0.machine.engineWillAdd() }
    }

    /// Publishes the result, unless the caller cancelled first. Engine thread.
    func complete(with result: consuming Result<TransferOutput, any Error>) {
        EngineThread.check(engine, "Transfer.complete")
        let waiters = lifecycle.withLock { state -> TransferWaiters? in
            guard state.machine.complete() == .deliver else { return nil }
            state.result = copy result  // for a waiter that comes later
            defer { state.waiters = TransferWaiters() }
            return state.waiters
        }
        guard let waiters else { return }
        if let reporters {
            if case .success = result {
                reporters.finish(succeeded: true)
            } else if current.failureEndsProgress {
                reporters.finish(succeeded: false)
            }
        }
        engine.deliver(result, to: waiters)  // moved: the last use
    }

    /// Resets the per-hop state before (re)adding the easy handle.
    func beginHop() {
        head.reset()
        discardingBody = false
        awaitingAuthRetry = false
        discardedBytes = 0
        cutRedirectBody = false
        receivedBytes = 0
        codedBytes = 0
        sentBytes = 0
        expectedBytes = nil
        callbackFailure = nil
        errorBuffer?[0] = 0
        pause.receiveBackpressure = false
        pause.receiveThrottled = false
        pause.sendWaiting = false
        pause.sendThrottled = false
        appliedPauseMask = pause.mask  // a new hop starts paused only if suspended
        bodyReader?.close()
        bodyReader = nil
        decoder = nil
        redelivered = 0
        unknownTransferCoding = false
    }

    /// Whether the sink, not yet ended, finds the body it was given incomplete. Engine thread.
    func sinkIncompleteness() -> CourierError? {
        EngineThread.check(engine, "Transfer.sinkIncompleteness")
        return sinkEnded ? nil : sink.checkComplete()
    }

    /// Ends the sink once. Engine thread.
    func endSink(_ outcome: SinkOutcome) -> Data {
        EngineThread.check(engine, "Transfer.endSink")
        guard !sinkEnded else { return Data() }
        sinkEnded = true
        bodyReader?.close()
        if outcome == .completed, let trailers = head.trailers { sink.trailersArrived(trailers) }
        return sink.end(outcome)
    }
}

/// The few facts about the current hop that libcurl's callbacks read for every chunk.
struct HopSettings {
    var followRedirects: Bool
    var isPlain: Bool
    /// A HEAD request: responses carry no body, whatever their `Content-Length` says.
    var isHead: Bool
    var uploadLength: Int64?
    /// HTTP/2 is possible: https (negotiated with ALPN), or HTTP/2 asked for over http.
    var mayMultiplex: Bool

    init(_ request: borrowing TransferRequest) {
        followRedirects = request.sharedOptions.value.followRedirects
        isPlain = request.isPlain
        isHead = request.head.method == .head
        uploadLength = request.body?.length
        switch request.sharedOptions.value.httpVersion {
        case .http1_1: mayMultiplex = false
        case .http2OverTLS, .http3, .http3WithFallback, .http3WhenAdvertised:
            mayMultiplex = request.urlString.hasPrefix("https:")
        case .http2, .http2PriorKnowledge: mayMultiplex = true
        }
    }
}

/// Why a transfer is paused. libcurl pauses a direction itself when a callback answers
/// "pause"; the engine unpauses it (`curl_easy_pause`) once no reason is left.
struct PauseState {
    /// `suspend()`: both directions.
    var suspended = false
    /// A byte stream's consumer is behind.
    var receiveBackpressure = false
    /// Over the session's bandwidth limit.
    var receiveThrottled = false
    /// The request body stream has nothing to send yet.
    var sendWaiting = false
    var sendThrottled = false

    var mask: Int32 {
        var mask: Int32 = 0
        if suspended || receiveBackpressure || receiveThrottled { mask |= Int32(CURLPAUSE_RECV) }
        if suspended || sendWaiting || sendThrottled { mask |= Int32(CURLPAUSE_SEND) }
        return mask
    }
}

/// A URL as libcurl parsed it (`curl_url_set`), for `CURLOPT_CURLU`. Engine thread only: made,
/// shared and released there (`CurlEngine.parsedURL(for:)`).
///
/// Given only `CURLOPT_URL`, libcurl parses the URL again for every transfer and prints its
/// normalised form back with its own `printf` (a seventh of what a small GET costs libcurl
/// 7.88: Documentation/Benchmarks.md, "Measurements behind the code"). Given this parse as well,
/// it copies the parse instead; `CURLOPT_URL` is still set, as the text libcurl reports.
final class ParsedURL {
    let handle: OpaquePointer

    init?(_ url: String) {
        guard let handle = courier_url_parse(url) else { return nil }
        self.handle = handle
    }

    deinit {
        curl_url_cleanup(handle)
    }
}

/// The URL string and header list of one hop, ready for `curl_easy_setopt`.
struct PreparedHop: Sendable {
    let url: String
    let headers: HeaderList

    init(_ request: borrowing TransferRequest, sharedHeaders: HeaderList? = nil) {
        url = request.urlString
        if let sharedHeaders {
            headers = sharedHeaders
        } else {
            headers = HeaderList(
                request.head.headerFields, hasBody: request.body != nil,
                acceptsCompressedResponses: request.sharedOptions.value.acceptsCompressedResponses)
        }
    }
}

/// A libcurl header list (`curl_slist`) for `CURLOPT_HTTPHEADER`.
///
/// `@unchecked Sendable`: immutable after `init`, and libcurl only reads it, so transfers on
/// any thread may share one (the session's default headers are built once). It is freed when
/// the last reference goes; an idle easy handle may still point at it, but libcurl reads
/// `CURLOPT_HTTPHEADER` only while a transfer runs, and every transfer sets its own list first.
final class HeaderList: @unchecked Sendable {
    let list: UnsafeMutablePointer<curl_slist>?

    /// The list for `fields`. With `acceptsCompressedResponses`, an `Accept-Encoding` line names
    /// every coding Courier decodes (`BodyDecoder.acceptEncoding`), unless `fields` has one.
    init(_ fields: HTTPFields, hasBody: Bool, acceptsCompressedResponses: Bool) {
        var list: UnsafeMutablePointer<curl_slist>?
        for field in fields {
            if field.name == .contentLength || field.name == .transferEncoding { continue }
            // "Name:" would make libcurl drop the header; "Name;" sends it empty.
            let line = field.value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(field.value)"
            list = curl_slist_append(list, line)
        }
        if acceptsCompressedResponses, fields[.acceptEncoding] == nil {
            list = curl_slist_append(list, "Accept-Encoding: \(BodyDecoder.acceptEncoding)")
        }
        if CurlRuntime.asksForTransferDecoding, fields[HTTPField.Name("TE")!] == nil {
            // Asked to decode transfer codings, libcurl would also send `TE: gzip` (and
            // `Connection: TE`); "TE:" keeps the request as it was.
            list = curl_slist_append(list, "TE:")
        }
        if hasBody, fields[.expect] == nil {
            // No `Expect: 100-continue` round trip unless the caller asks for one.
            list = curl_slist_append(list, "Expect:")
        }
        self.list = list
    }

    /// A list of lines as they are.
    init(lines: [String]) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines { list = curl_slist_append(list, line) }
        self.list = list
    }

    deinit {
        if let list { curl_slist_free_all(list) }
    }
}

extension Transfer: EngineDeadline {
    /// The call's deadline while the transfer waits for a place (libcurl's own timer has it
    /// once it runs).
    var deadline: UInt64? { waitsForPlace ? callDeadline : nil }

    /// The call's deadline came while the transfer waited for a place: it leaves the queue and
    /// fails with `timedOut`. Engine thread.
    func deadlinePassed(now: UInt64) {
        guard waitsForPlace else { return }
        waitsForPlace = false
        guard let limit = engine.withdrawFromQueue(self) else { return }  // admitted meanwhile
        complete(
            with: .failure(
                CourierError.timedOut(
                    .init(
                        url: current.url,
                        message:
                            "The request's resource timeout passed while it waited for a place: the session's "
                            + "\(limit) transfer\(limit == 1 ? "" : "s") at once (maximumConcurrentTasks) were all "
                            + "taken"))))
    }
}

/// The continuations waiting for a transfer's result: almost always one, held inline (an
/// array would be a heap allocation per request).
struct TransferWaiters {
    private var first: UnsafeContinuation<TransferOutput, any Error>?
    private var others: [UnsafeContinuation<TransferOutput, any Error>] = []

    var isEmpty: Bool { first == nil }

    mutating func append(_ waiter: UnsafeContinuation<TransferOutput, any Error>) {
        if first == nil { first = waiter } else { others.append(waiter) }
    }

    /// Resumes each waiter once, the first with `result` itself.
    func resume(with result: consuming Result<TransferOutput, any Error>) {
        for waiter in others { waiter.resume(with: result) }
        first?.resume(with: result)
    }
}
