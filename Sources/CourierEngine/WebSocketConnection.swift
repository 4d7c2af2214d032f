import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes
import Synchronization

/// A WebSocket on the libcurl engine: libcurl connects (`CURLOPT_CONNECT_ONLY` on a
/// `WebSocketMulti`: DNS, the proxy tunnel, TLS with the session's trust, pins and client
/// certificate), then this object writes the opening handshake, reads the `101`, and speaks
/// RFC 6455 over the connection with `curl_easy_send` and `curl_easy_recv`, driven by the
/// engine's epoll loop like every transfer: no thread of its own.
///
/// Threading: the `WebSocketChannel` methods run on any thread and hand their work to the
/// engine thread with `submit`; everything marked `@EngineConfined` is the engine thread's.
/// Received messages go to the reader through the thread-safe `WebSocketInbox`.
final class WebSocketConnection: WebSocketChannel, EngineDeadline, @unchecked Sendable {
    enum Phase {
        case idle, connecting, handshaking, open, finished
    }

    /// A frame waiting to be written, and who waits for it.
    private struct Outgoing {
        var bytes: [UInt8]
        var waiter: CheckedContinuation<Void, any Error>?
        /// A pong: a later ping's takes its place while none of its bytes are written.
        var isPong = false
    }

    /// A ping waiting for its pong (a keep-alive ping has no waiter).
    private struct Ping {
        var payload: [UInt8]
        var sent: ContinuousClock.Instant
        var waiter: CheckedContinuation<Duration, any Error>?
    }

    private struct Shared {
        var opener: CheckedContinuation<WebSocketOpening, any Error>?
        var closure: WebSocketClosure?
        /// permessage-deflate was agreed: messages are compressed on the engine thread, in
        /// the order they go out (the compressor's window runs across them).
        var compresses = false
    }

    let engine: CurlEngine
    let request: TransferRequest
    let parameters: WebSocketParameters
    /// The ws or wss URL, for errors.
    let url: URL?
    private let key = WebSocketHandshake.makeKey()
    /// Set in `init`, never changed.
    private(set) var inbox: WebSocketInbox!
    private let shared = Locked(Shared())
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// The most bytes that ever waited to be written at once: what a test reads to see that
    /// a server which does not read cannot make the queue grow.
    let peakUnwrittenBytes = Atomic<Int>(0)

    /// Ping bytes (payloads and headers) read while a pong waits unwritten before the socket
    /// stops being read: a server that pings faster than it reads the pongs is held back by
    /// TCP, instead of keeping the engine reading and coalescing pings for as long as it
    /// likes. A server that pings now and then never comes near it.
    static let pingBytesWhilePongWaitsLimit = 64 << 10

    /// The most bytes read from the socket in one go before the engine's other work.
    static let readBudget = 1 << 20

    @EngineConfined private var phase = Phase.idle
    @EngineConfined private var easy: UnsafeMutableRawPointer?
    /// The server trust evaluation of the connection, when its TLS policy has an evaluator.
    @EngineConfined private var trustContext: TrustContext?
    @EngineConfined private var multi: WebSocketMulti?
    @EngineConfined private var socket: Int32 = -1
    /// The interest the socket is registered with in the epoll set (`CURL_POLL_*`); 0: none.
    @EngineConfined private var interest: Int32 = 0
    @EngineConfined private var headBytes: [UInt8] = []
    @EngineConfined private var sentRequest: HTTPRequest?
    @EngineConfined private var reader: WebSocketFrameReader
    /// permessage-deflate's state, once agreed.
    @EngineConfined private var deflater: WebSocketDeflater?
    @EngineConfined private var outgoing: [Outgoing] = []
    @EngineConfined private var firstOutgoing = 0
    /// Bytes of the first waiting frame already written.
    @EngineConfined private var writtenOfFirst = 0
    @EngineConfined private var pings: [Ping] = []
    @EngineConfined private var lastPing: UInt32 = 0
    @EngineConfined private var closeSent = false
    @EngineConfined private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    /// The reader is behind (or the connection is failing): the socket is not read.
    @EngineConfined private var readingPaused = false
    /// Bytes of `outgoing` not yet written.
    @EngineConfined private var unwrittenBytes = 0
    /// The index in `outgoing` of a pong none of whose bytes are written yet.
    @EngineConfined private var replaceablePong: Int?
    /// Pongs queued and not wholly written: at most two, one being written and one waiting.
    @EngineConfined private var unwrittenPongs = 0
    /// Bytes of pings read while a pong waited unwritten, since no pong was waiting.
    @EngineConfined private var pingBytesWhilePongWaits = 0
    /// A server pings faster than it reads the pongs: the socket is not read until the
    /// waiting pong is written.
    @EngineConfined private var readingHeldForPong = false
    /// Inside `readAvailable`: a pong written while reading lets that loop go on, instead of
    /// starting another.
    @EngineConfined private var isReading = false
    /// A read is waiting in the engine's commands (`readLater`).
    @EngineConfined private var readScheduled = false
    /// How the connection ends once the frames queued are written (after a close).
    @EngineConfined private var ending: Result<Void, any Error>?
    /// Why the connection failed, for the calls that come after.
    @EngineConfined private var failure: (any Error)?
    /// The open timeout while opening; the close timeout once closing.
    @EngineConfined private var phaseDeadline: UInt64?
    @EngineConfined private var keepaliveDeadline: UInt64?
    @EngineConfined private var receivedSinceKeepalive = false
    @EngineConfined private var keepaliveOutstanding = false

    init(engine: CurlEngine, request: TransferRequest, parameters: WebSocketParameters) {
        self.engine = engine
        self.request = request
        self.parameters = parameters
        url = WebSocketHandshake.webSocketURL(forHTTP: request.url)
        reader = WebSocketFrameReader(
            maximumMessageSize: parameters.maximumMessageSize, maximumTotalSize: parameters.maximumTotalSize)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer[0] = 0
        // Counted from now, not from `start()` on the engine thread: sockets opened together
        // would otherwise all see the same engine as the least busy.
        engine.submitted.add(1, ordering: .relaxed)
        inbox = WebSocketInbox(limit: parameters.receiveQueueLimit) { [weak self] in
            guard let self else { return }
            _ = self.engine.submit(.run { _ in self.resumeReading() })
        }
    }

    deinit {
        errorBuffer.deallocate()
    }

    /// The earlier of the phase's deadline and the keep-alive's.
    var deadline: UInt64? {
        switch (phaseDeadline, keepaliveDeadline) {
        case (let phase?, let keepalive?): min(phase, keepalive)
        case (let phase?, nil): phase
        case (nil, let keepalive): keepalive
        }
    }

    // MARK: - The channel (any thread)

    func open() async throws -> WebSocketOpening {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                shared.withLock { $0.opener = continuation }
                if !engine.submit(.run { [self] _ in start() }) {
                    takeOpener()?.resume(throwing: Self.invalidated(url))
                }
            }
        } onCancel: {
            cancel()
        }
    }

    func send(_ message: WebSocketEvent) async throws {
        // Framed and masked here, off the engine thread, unless permessage-deflate was agreed:
        // the compressor's window then runs across messages in the order they go out.
        let frame =
            shared.withLock({ $0.compresses })
            ? nil : message.withMessagePayload { WebSocketFrameWriter.frame($0, bytes: $1, mask: Self.maskKey()) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let work: @Sendable (CurlEngine) -> Void = { [self] _ in
                if let frame {
                    enqueue(frame, waiter: continuation)
                } else {
                    enqueueCompressed(message, waiter: continuation)
                }
            }
            if !engine.submit(.run(work)) { continuation.resume(throwing: Self.invalidated(url)) }
        }
    }

    func receive() async throws -> WebSocketEvent? {
        try await inbox.next()
    }

    func ping() async throws -> Duration {
        try await withCheckedThrowingContinuation { continuation in
            if !engine.submit(.run { [self] _ in sendPing(waiter: continuation) }) {
                continuation.resume(throwing: Self.invalidated(url))
            }
        }
    }

    func close(code: UInt16, reason: String) async {
        await withCheckedContinuation { continuation in
            if !engine.submit(.run { [self] _ in startClose(code: code, reason: reason, waiter: continuation) }) {
                continuation.resume()
            }
        }
    }

    func cancel() {
        _ = engine.submit(.run { [self] _ in finish(.failure(CancellationError())) })
    }

    var closure: WebSocketClosure? { shared.withLock { $0.closure } }

    private func takeOpener() -> CheckedContinuation<WebSocketOpening, any Error>? {
        shared.withLock { shared in
            defer { shared.opener = nil }
            return shared.opener
        }
    }

    private static func invalidated(_ url: URL?) -> CourierError {
        .sessionInvalidated(.init(url: url, message: "The session was invalidated"))
    }

    /// A masking key from the system's random source, as RFC 6455 section 5.3 asks.
    private static func maskKey() -> UInt32 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    // MARK: - Connecting (engine thread)

    private func start() {
        EngineThread.check(engine, "WebSocketConnection.start")
        guard phase == .idle else {
            // Cancelled before it started.
            takeOpener()?.resume(throwing: failure ?? CancellationError())
            return
        }
        engine.webSockets[ObjectIdentifier(self)] = self
        // A head that could not be sent fails before libcurl connects (the cookies added
        // later come from the cookie store, which holds no control characters).
        do {
            _ = try handshakeBytes(fields: request.head.headerFields)
        } catch {
            phase = .connecting
            finish(.failure(error))
            return
        }
        phase = .connecting
        setPhaseDeadline(after: parameters.openTimeout)
        guard let easy = CurlRuntime.handle(curl_easy_init) else {
            finish(.failure(CourierError.transport(.init(url: url, message: "curl_easy_init failed"))))
            return
        }
        self.easy = easy
        let options = request.sharedOptions.value
        let tls = options.tls.hosts.isEmpty ? options.tls : options.tls.forHost(HostName.of(request.url))
        Transfer.configureCommonOptions(easy, options, tls: tls, engine: engine)
        // Connect (through the proxy's tunnel, with TLS) and stop: the rest is ours.
        courier_easy_setopt_long(easy, CURLOPT_CONNECT_ONLY, 1)
        courier_easy_setopt_long(easy, CURLOPT_HTTPPROXYTUNNEL, 1)
        // ALPN offers http/1.1 alone: an HTTP/2 server must not answer the upgrade in HTTP/2.
        courier_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        courier_easy_setopt_string(easy, CURLOPT_URL, request.urlString)
        // The only head libcurl reads is a proxy's answer to CONNECT: not the transfers'.
        courier_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        courier_easy_setopt_header_function(easy, webSocketDiscardCallback)
        courier_easy_setopt_write_function(easy, webSocketDiscardCallback)
        // libcurl's receive buffer serves the proxy's CONNECT answer only: ours reads the rest.
        courier_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 1024)
        courier_easy_setopt_pointer(easy, CURLOPT_PRIVATE, Unmanaged.passUnretained(self).toOpaque())
        courier_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        Transfer.configurePins(easy, tls.pins, url: request.url)
        do {
            trustContext = try Transfer.configureTrust(
                easy, tls, url: request.url, stores: engine.shares.caStores, options: options)
        } catch {
            finish(.failure(error))
            return
        }
        if let credential = request.proxyCredential {
            Transfer.setCredential(
                credential, easy, user: CURLOPT_PROXYUSERNAME, password: CURLOPT_PROXYPASSWORD,
                schemes: CURLOPT_PROXYAUTH)
        }
        let multi = engine.webSocketMultiWithRoom()
        multi.connections += 1
        self.multi = multi
        let code = curl_multi_add_handle(multi.handle, easy)
        if code != CURLM_OK {
            let message = String(cString: curl_multi_strerror(code))
            finish(.failure(CourierError.transport(.init(url: url, message: message))))
        }
    }

    /// libcurl finished connecting (or failed to). The easy handle stays in its multi handle:
    /// `curl_easy_send` and `curl_easy_recv` find the connection through it.
    func connected(_ code: CURLcode) {
        guard phase == .connecting, let easy else { return }
        guard code == CURLE_OK else {
            var verifyResult = 0
            courier_easy_getinfo_long(easy, CURLINFO_SSL_VERIFYRESULT, &verifyResult)
            let error = CourierError.fromCurl(
                code, detail: String(cString: errorBuffer), context: .init(url: url, message: ""),
                verifyResult: verifyResult)
            finish(.failure(trustContext?.explain(error) ?? error))
            return
        }
        var active: curl_socket_t = -1
        courier_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &active)
        guard active >= 0 else {
            finish(.failure(CourierError.transport(.init(url: url, message: "libcurl kept no connection"))))
            return
        }
        socket = active
        var entry = engine.sockets[active]
        if entry.interest != nil { courier_epoll_unwatch(engine.epollFD, active) }
        entry.interest = nil
        entry.owner = .webSocket
        engine.sockets[active] = entry
        engine.webSocketsBySocket[active] = self
        phase = .handshaking

        var sent = request.head
        if request.sharedOptions.value.handlesCookies, sent.headerFields[.cookie] == nil, let cookies = engine.cookies,
            let header = cookies.requestHeader(for: request.urlString)
        {
            sent.headerFields[.cookie] = header
        }
        sentRequest = sent
        let head: [UInt8]
        do {
            head = try handshakeBytes(fields: sent.headerFields)
        } catch {
            fail(error)
            return
        }
        enqueueOwn(head)
        flush()
    }

    /// The handshake's request head with `fields`; throws for a URL or a field that cannot
    /// go into a head (a line break, a control character).
    private func handshakeBytes(fields: HTTPFields) throws(CourierError) -> [UInt8] {
        guard let url = request.url else {
            throw .invalidURL(.init(url: url, message: "'\(request.urlString)' is not a valid URL"))
        }
        return try WebSocketHandshake.requestBytes(
            url: url, key: key, protocols: parameters.protocols, fields: fields,
            offersCompression: parameters.offersCompression)
    }

    // MARK: - Reading (engine thread)

    /// The engine's epoll set has events for the socket.
    func socketReady(events: Int32) {
        if events & Int32(CURL_CSELECT_OUT) != 0 { flush() }
        guard phase != .finished, events & Int32(CURL_CSELECT_IN | CURL_CSELECT_ERR) != 0 else { return }
        if readingPaused {
            // A hang-up is reported whatever the interest: out of the set until reading resumes.
            unwatch()
            return
        }
        // Not watched for reading while a pong waits: this is a hang-up or an error, which a
        // read tells apart (and ends the connection with).
        readingHeldForPong = false
        readAvailable()
    }

    /// Whether the socket is read: not while the reader is behind, nor while a ping flood
    /// waits for its pong to be written.
    private var readsSocket: Bool { !readingPaused && !readingHeldForPong }

    /// Reads until the socket (and TLS) has nothing more, the reader falls behind, the
    /// connection ends, or `readBudget` bytes are read: then the rest is read in a later
    /// turn of the engine's loop, after the other sockets' events and the commands waiting
    /// (a cancel among them). A server that sends faster than the engine reads (a flood of
    /// pongs, which ask for nothing and fill no queue) would otherwise keep the engine's
    /// thread here.
    private func readAvailable() {
        guard let easy, !isReading else { return }
        isReading = true
        defer { isReading = false }
        let buffer = engine.webSocketReadBuffer()
        var budget = Self.readBudget
        while phase != .finished && readsSocket {
            guard budget > 0 else {
                readLater()
                return
            }
            var count = 0
            let code = curl_easy_recv(easy, buffer.baseAddress, buffer.count, &count)
            if code == CURLE_AGAIN { break }
            guard code == CURLE_OK else {
                failAfterCurl(code)
                return
            }
            guard count > 0 else {
                endOfInput()
                return
            }
            budget -= count
            received(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Reads again in a later turn of the engine's loop: through a command, since TLS may
    /// hold bytes that no epoll event announces.
    private func readLater() {
        guard !readScheduled else { return }
        readScheduled = true
        _ = engine.submit(
            .run { [self] _ in
                readScheduled = false
                readAvailable()
            })
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard phase == .handshaking else {
            frames(bytes)
            return
        }
        headBytes.append(contentsOf: bytes)
        guard let end = Self.endOfHead(in: headBytes) else {
            if headBytes.count > 64 << 10 {
                fail(
                    CourierError.invalidResponse(
                        .init(url: url, message: "The handshake's answer has no end within 64 KB")))
            }
            return
        }
        let rest = Array(headBytes[end...])
        var parser = RecordedHead()
        var lineStart = 0
        for index in headBytes.indices where index < end && headBytes[index] == 0x0A {
            let result = headBytes.withUnsafeBytes {
                parser.consume(UnsafeRawBufferPointer(rebasing: $0[lineStart...index]))
            }
            if case .invalid(let problem) = result {
                fail(CourierError.invalidResponse(.init(url: url, message: problem)))
                return
            }
            lineStart = index + 1
        }
        headBytes = []
        guard parser.isComplete, let response = parser.response else {
            fail(CourierError.invalidResponse(.init(url: url, message: "The handshake's answer is not HTTP")))
            return
        }
        if parser.hasSetCookie, request.sharedOptions.value.handlesCookies, let cookies = engine.cookies,
            let url = request.url
        {
            cookies.storeSetCookies(parser.values(of: "set-cookie"), from: url)
        }
        let answer = WebSocketHandshake.check(
            response, key: key, protocols: parameters.protocols, offeredCompression: parameters.offersCompression)
        if let compression = answer.compression {
            guard let deflater = WebSocketDeflater(compression) else {
                fail(CourierError.transport(.init(url: url, message: "zlib could not allocate permessage-deflate")))
                return
            }
            self.deflater = deflater
            reader.compression = deflater
            shared.withLock { $0.compresses = true }
        }
        if let problem = answer.failure {
            var context = CourierError.Context(url: url, response: response, message: problem)
            if !rest.isEmpty { context.body = Data(rest) }
            fail(CourierError.webSocketHandshakeFailed(context))
            return
        }
        phase = .open
        phaseDeadline = nil
        if let interval = parameters.pingInterval {
            keepaliveDeadline = courier_monotonic_nanoseconds() + Self.nanoseconds(interval)
            engine.deadlines.schedule(self, at: keepaliveDeadline!)
        }
        let opening = WebSocketOpening(
            request: sentRequest ?? request.head, response: response, subprotocol: answer.protocol)
        takeOpener()?.resume(returning: opening)
        if !rest.isEmpty { rest.withUnsafeBytes { frames($0) } }
    }

    /// The index after the blank line that ends the head, if it has arrived.
    private static func endOfHead(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count
        where bytes[index] == 0x0A && bytes[index - 1] == 0x0D && bytes[index - 2] == 0x0A
            && bytes[index - 3] == 0x0D
        {
            return index + 1
        }
        return nil
    }

    private func frames(_ bytes: UnsafeRawBufferPointer) {
        receivedSinceKeepalive = true
        // The messages that arrived whole before a violation go to the reader first, however
        // the server's bytes were cut into reads: they were sent, and are the reader's.
        let (events, violation) = reader.read(bytes)
        for event in events {
            handle(event)
            if phase == .finished { return }
        }
        // After the server's close frame, what follows it is not read (RFC 6455 section 5.5.1).
        guard let violation, ending == nil else { return }
        var context = closingContext(violation.message, code: violation.closeCode)
        context.webSocketCloseCode = violation.closeCode
        let failure: CourierError =
            violation.closeCode == 1009 ? .responseTooLarge(context) : .webSocketProtocolViolation(context)
        closeAfterFailure(failure, code: violation.closeCode)
    }

    private func handle(_ event: WebSocketEvent) {
        switch event {
        case .text, .binary:
            guard ending == nil else { return }
            if inbox.push(event) {
                readingPaused = true
                updateInterest()
            }
        case .ping(let payload):
            if !closeSent { answer(ping: payload) }
        case .pong(let payload):
            keepaliveOutstanding = false
            if let index = pings.firstIndex(where: { $0.payload == payload }) {
                let ping = pings.remove(at: index)
                ping.waiter?.resume(returning: ContinuousClock.now - ping.sent)
            }
        case .close(let code, let reason):
            shared.withLock { $0.closure = WebSocketClosure(code: code, reason: reason) }
            if !closeSent {
                // Echo the code (RFC 6455 section 5.5.1), then end.
                closeSent = true
                queue(.close, code.map { WebSocketFrameWriter.closePayload(code: $0, reason: "") } ?? [])
            }
            end(.success(()))
        }
    }

    /// The server closed the connection.
    private func endOfInput() {
        if let ending {
            finish(ending)
        } else if closeSent {
            finish(.success(()))  // we asked to close; the server closed without its frame
        } else {
            fail(
                CourierError.connectionLost(
                    closingContext("The server closed the connection without a close frame", code: 1006)))
        }
    }

    /// The reader took enough messages: read again (TLS may hold bytes that no epoll event
    /// will announce).
    private func resumeReading() {
        guard readingPaused, phase != .finished, ending == nil else { return }
        readingPaused = false
        updateInterest()
        readAvailable()
    }

    // MARK: - Writing (engine thread)

    private func enqueue(_ frame: [UInt8], waiter: CheckedContinuation<Void, any Error>) {
        guard phase == .open, !closeSent else {
            waiter.resume(throwing: closedError("A message cannot be sent"))
            return
        }
        append(Outgoing(bytes: frame, waiter: waiter))
        flush()
    }

    /// A message compressed (permessage-deflate) and queued. Engine thread: the compressor's
    /// window runs from message to message in the order they are sent.
    private func enqueueCompressed(_ message: WebSocketEvent, waiter: CheckedContinuation<Void, any Error>) {
        guard phase == .open, !closeSent, let deflater else {
            waiter.resume(throwing: closedError("A message cannot be sent"))
            return
        }
        let (opcode, compressed) = message.withMessagePayload { ($0, deflater.compress($1)) }
        let frame = compressed.withUnsafeBytes {
            WebSocketFrameWriter.frame(opcode, bytes: $0, mask: Self.maskKey(), compressed: true)
        }
        append(Outgoing(bytes: frame, waiter: waiter))
        flush()
    }

    private func queue(_ opcode: WebSocketOpcode, _ payload: [UInt8]) {
        enqueueOwn(WebSocketFrameWriter.frame(opcode, payload, mask: Self.maskKey()))
        flush()
    }

    /// Bytes the connection writes on its own (the handshake, control frames), nobody waiting.
    private func enqueueOwn(_ bytes: [UInt8]) {
        append(Outgoing(bytes: bytes, waiter: nil))
    }

    private func append(_ item: Outgoing) {
        outgoing.append(item)
        unwrittenBytes += item.bytes.count
        notePeak()
    }

    private func notePeak() {
        // Stored on the engine thread only: the load and the store do not race.
        if unwrittenBytes > peakUnwrittenBytes.load(ordering: .relaxed) {
            peakUnwrittenBytes.store(unwrittenBytes, ordering: .relaxed)
        }
    }

    /// Answers a ping. A pong that has not started to be written takes the new ping's
    /// payload instead of a second pong joining the queue: RFC 6455 section 5.5.3 lets an
    /// endpoint answer only the most recent of several pings, and a server that pings faster
    /// than it reads would otherwise grow the queue without end. When such a server has sent
    /// more than `pingBytesWhilePongWaitsLimit` of pings while a pong waits, reading stops
    /// until the pong is written.
    private func answer(ping payload: [UInt8]) {
        let pong = WebSocketFrameWriter.frame(.pong, payload, mask: Self.maskKey())
        if let index = replaceablePong {
            unwrittenBytes += pong.count - outgoing[index].bytes.count
            outgoing[index].bytes = pong
            notePeak()
        } else {
            replaceablePong = outgoing.count
            unwrittenPongs += 1
            append(Outgoing(bytes: pong, waiter: nil, isPong: true))
        }
        flush()
        guard unwrittenPongs > 0, phase != .finished else { return }
        pingBytesWhilePongWaits += 2 + payload.count
        if pingBytesWhilePongWaits > Self.pingBytesWhilePongWaitsLimit && !readingHeldForPong {
            readingHeldForPong = true
            updateInterest()
        }
    }

    private func sendPing(waiter: CheckedContinuation<Duration, any Error>?) {
        guard phase == .open, !closeSent else {
            waiter?.resume(throwing: closedError("A ping cannot be sent"))
            return
        }
        lastPing &+= 1
        let payload = withUnsafeBytes(of: lastPing.bigEndian) { Array($0) }
        pings.append(Ping(payload: payload, sent: .now, waiter: waiter))
        queue(.ping, payload)
    }

    /// Writes the waiting frames until the socket takes no more.
    private func flush() {
        guard let easy, phase != .finished else { return }
        while firstOutgoing < outgoing.count {
            var count = 0
            let code = outgoing[firstOutgoing].bytes.withUnsafeBytes { bytes in
                curl_easy_send(easy, bytes.baseAddress! + writtenOfFirst, bytes.count - writtenOfFirst, &count)
            }
            if code == CURLE_AGAIN { break }
            guard code == CURLE_OK else {
                failAfterCurl(code)
                return
            }
            writtenOfFirst += count
            unwrittenBytes -= count
            // Part of it is on its way: a later ping's pong goes after it, not in its place.
            if count > 0, replaceablePong == firstOutgoing { replaceablePong = nil }
            if writtenOfFirst == outgoing[firstOutgoing].bytes.count {
                let waiter = outgoing[firstOutgoing].waiter
                if outgoing[firstOutgoing].isPong { unwrittenPongs -= 1 }
                if replaceablePong == firstOutgoing { replaceablePong = nil }
                outgoing[firstOutgoing] = Outgoing(bytes: [], waiter: nil)
                firstOutgoing += 1
                writtenOfFirst = 0
                waiter?.resume()
            }
        }
        if firstOutgoing == outgoing.count {
            outgoing.removeAll(keepingCapacity: true)
            firstOutgoing = 0
            if let ending {
                finish(ending)
                return
            }
        }
        if unwrittenPongs == 0 { pingBytesWhilePongWaits = 0 }
        let resumes = unwrittenPongs == 0 && readingHeldForPong
        if resumes { readingHeldForPong = false }
        updateInterest()
        // The pong is out: read again (TLS may hold bytes that no epoll event announces).
        if resumes { readAvailable() }
    }

    /// Watches the socket for reading unless the reader is behind, and for writing while
    /// frames wait.
    private func updateInterest() {
        guard socket >= 0, phase != .finished else { return }
        var wanted: Int32 = 0
        if readsSocket { wanted |= Int32(CURL_POLL_IN) }
        if firstOutgoing < outgoing.count { wanted |= Int32(CURL_POLL_OUT) }
        guard wanted != interest else { return }
        if wanted == 0 {
            unwatch()
            return
        }
        let add: Int32 = interest == 0 ? 1 : 0
        if courier_epoll_set(engine.epollFD, socket, wanted, add) != 0 {
            courier_epoll_set(engine.epollFD, socket, wanted, 1 - add)
        }
        interest = wanted
    }

    private func unwatch() {
        guard interest != 0 else { return }
        courier_epoll_unwatch(engine.epollFD, socket)
        interest = 0
    }

    // MARK: - Closing (engine thread)

    private func startClose(code: UInt16, reason: String, waiter: CheckedContinuation<Void, Never>) {
        guard phase != .finished else {
            waiter.resume()
            return
        }
        closeWaiters.append(waiter)
        guard phase == .open else {
            finish(.failure(closedError("The WebSocket was closed before it opened")))
            return
        }
        guard !closeSent else { return }
        closeSent = true
        setPhaseDeadline(after: parameters.closeTimeout)
        queue(.close, WebSocketFrameWriter.closePayload(code: code, reason: reason))
    }

    /// A frame broke the protocol: send a close with `code`, then end with `error`.
    private func closeAfterFailure(_ error: CourierError, code: UInt16) {
        readingPaused = true
        if !closeSent, phase == .open {
            closeSent = true
            queue(.close, WebSocketFrameWriter.closePayload(code: code, reason: ""))
        }
        guard phase != .finished else { return }
        end(.failure(error))
    }

    /// Ends with `result` once the frames queued are written (within the close timeout).
    private func end(_ result: Result<Void, any Error>) {
        ending = result
        if firstOutgoing == outgoing.count {
            finish(result)
        } else if phaseDeadline == nil {
            setPhaseDeadline(after: parameters.closeTimeout)
        }
    }

    private func fail(_ error: any Error) {
        finish(.failure(error))
    }

    /// `curl_easy_send` or `curl_easy_recv` failed: the connection is gone (1006).
    private func failAfterCurl(_ code: CURLcode) {
        fail(CourierError.fromCurl(code, detail: String(cString: errorBuffer), context: closingContext("", code: 1006)))
    }

    private func setPhaseDeadline(after duration: Duration) {
        let due = courier_monotonic_nanoseconds() + Self.nanoseconds(duration)
        phaseDeadline = due
        engine.deadlines.schedule(self, at: due)
    }

    func deadlinePassed(now: UInt64) {
        if let due = phaseDeadline, due <= now {
            phaseDeadline = nil
            switch phase {
            case .idle, .connecting, .handshaking:
                fail(
                    CourierError.timedOut(
                        .init(url: url, message: "The WebSocket did not open within \(parameters.openTimeout)"))
                )
            case .open:
                // The server did not answer the close (or did not read what was queued).
                finish(ending ?? .success(()))
            case .finished:
                break
            }
            return
        }
        guard let due = keepaliveDeadline, due <= now, let interval = parameters.pingInterval, phase == .open else {
            return
        }
        if !receivedSinceKeepalive && keepaliveOutstanding {
            fail(
                CourierError.timedOut(
                    closingContext("Nothing arrived for \(interval), not even the answer to a ping", code: 1006)))
            return
        }
        if !receivedSinceKeepalive && !closeSent {
            keepaliveOutstanding = true
            sendPing(waiter: nil)
        }
        receivedSinceKeepalive = false
        keepaliveDeadline = now + Self.nanoseconds(interval)
        engine.deadlines.schedule(self, at: keepaliveDeadline!)
    }

    /// Takes the connection down and answers everyone waiting. Idempotent.
    func finish(_ result: Result<Void, any Error>) {
        guard phase != .finished else { return }
        let wasStarted = phase != .idle
        let wasOpen = phase == .open
        phase = .finished
        phaseDeadline = nil
        keepaliveDeadline = nil
        if socket >= 0 {
            unwatch()
            engine.webSocketsBySocket[socket] = nil
        }
        if let easy {
            if let multi {
                // Closes the connection: libcurl closes a connect-only transfer's with it.
                curl_multi_remove_handle(multi.handle, easy)
                multi.connections -= 1
            }
            curl_easy_cleanup(easy)
            self.easy = nil
        }
        if socket >= 0, engine.sockets[socket].owner == .webSocket { engine.sockets[socket] = SocketTable.Entry() }
        socket = -1
        if wasStarted { engine.webSockets[ObjectIdentifier(self)] = nil }
        engine.submitted.subtract(1, ordering: .relaxed)
        var error: (any Error)?
        if case .failure(let failure) = result { error = failure }
        failure = error
        takeOpener()?.resume(throwing: error ?? closedError("The WebSocket was closed before it opened"))
        inbox.finish(result)
        let closed = closedError("The WebSocket closed")
        for item in outgoing[firstOutgoing...] { item.waiter?.resume(throwing: closed) }
        outgoing = []
        firstOutgoing = 0
        unwrittenBytes = 0
        replaceablePong = nil
        unwrittenPongs = 0
        for ping in pings { ping.waiter?.resume(throwing: closed) }
        pings = []
        for waiter in closeWaiters { waiter.resume() }
        closeWaiters = []
        if wasOpen { parameters.onEnd?(result, closure) }
    }

    /// The error for a call on a connection that is closed or failed: the failure when there
    /// was one.
    private func closedError(_ what: String) -> any Error {
        if let failure { return failure }
        var context = CourierError.Context(url: url, message: "\(what): the WebSocket is closed")
        context.webSocketCloseCode = shared.withLock { $0.closure?.code }
        return CourierError.webSocketClosed(context)
    }

    private func closingContext(_ message: String, code: UInt16) -> CourierError.Context {
        var context = CourierError.Context(url: url, message: message)
        context.webSocketCloseCode = code
        return context
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(min(duration.milliseconds, Int(Int32.max)), 1)) * 1_000_000
    }
}

/// The header and write functions of a WebSocket's easy handle: libcurl reads nothing for it
/// but a proxy's answer to CONNECT, which is not the transfers' business.
private let webSocketDiscardCallback: curl_write_callback = { _, size, count, _ in size * count }

extension CurlEngine {
    /// The buffer WebSockets read into, made on first use. Engine thread.
    func webSocketReadBuffer() -> UnsafeMutableRawBufferPointer {
        if let buffer = webSocketBuffer { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        webSocketBuffer = buffer
        return buffer
    }
}
