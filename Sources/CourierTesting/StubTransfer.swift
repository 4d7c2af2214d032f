import Courier
@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// One request on a ``StubTransport``: a Swift task that reads the body, asks the stub, follows
/// redirects, and feeds the response to the sink as the engine does.
///
/// Its lifecycle is the engine's: the same `TransferStateMachine` decides what `start`,
/// `cancel`, `suspend`, `resume` and the completion do, whichever of them comes first. The
/// task plays the engine's part: it asks the machine before it runs (`engineWillAdd`: a
/// transfer suspended or cancelled meanwhile is parked or skipped), and a running transfer
/// that is suspended waits at the next head or chunk until it is resumed.
///
/// `@unchecked Sendable`: `state` guards the lifecycle; `sink` and `reporters` are used by the
/// one task that runs the transfer, one call at a time.
final class StubTransfer: TransportTransfer, @unchecked Sendable {
    private struct State {
        var machine = TransferStateMachine()
        /// The task of the latest `enqueue` (an earlier one was parked and has returned).
        var task: Task<Void, Never>?
        /// Counts `enqueue`s, so that an earlier one does not keep its task over a later one's.
        var enqueued = 0
        var result: Result<TransferOutput, any Error>?
        var waiters: [CheckedContinuation<TransferOutput, any Error>] = []
        /// The request of the current hop, once a redirect was followed.
        var redirectedRequest: HTTPRequest?
        /// Waiting for `resume()` (suspended) or `resumeReceiving()` (the sink paused).
        var gate: [CheckedContinuation<Void, Never>] = []
        var receivePaused = false
        var onFinish: (@Sendable () -> Void)?

        /// Whether the exchange must wait: suspended while running, or the sink paused.
        var isHeld: Bool { machine.isSuspendedWhileRunning || receivePaused }

        /// The continuations waiting at the gate, when it is open now (emptied).
        mutating func takeGateIfOpen() -> [CheckedContinuation<Void, Never>] {
            guard !isHeld else { return [] }
            defer { gate = [] }
            return gate
        }
    }

    let request: TransferRequest
    let requestURL: String
    var currentRequest: HTTPRequest { state.withLock { $0.redirectedRequest } ?? request.head }
    private let stub: StubTransport
    private let reporters: TransferReporters?
    private let sink: any ResponseSink
    private let state = Locked(State())
    /// Called once the transfer has finished (then dropped).
    var onFinish: (@Sendable () -> Void)? {
        get { state.withLock { $0.onFinish } }
        set { state.withLock { $0.onFinish = newValue } }
    }

    init(request: TransferRequest, stub: StubTransport, reporters: TransferReporters?, sink: any ResponseSink) {
        self.request = request
        self.requestURL = request.urlString
        self.stub = stub
        self.reporters = reporters
        self.sink = sink
    }

    // MARK: Control

    func start() {
        let action = state.withLock { $0.machine.start() }
        if action == .enqueue { enqueue() }
    }

    /// Hands the transfer to a task that plays the engine: it asks the machine whether it may
    /// still run, as the engine does when it takes a transfer from its inbox.
    private func enqueue() {
        let number = state.withLock { state in
            state.enqueued += 1
            return state.enqueued
        }
        let task = Task {
            let action = self.state.withLock { $0.machine.engineWillAdd() }
            // `.park`: suspended meanwhile, `resume()` enqueues it again; `.skip`: cancelled.
            guard action == .add else { return }
            await self.run()
        }
        let kept = state.withLock { state -> Bool in
            guard state.result == nil else { return false }
            if state.enqueued == number { state.task = task }
            return true
        }
        if !kept { task.cancel() }  // cancelled meanwhile
    }

    func cancel() {
        typealias Taken = (
            task: Task<Void, Never>?, waiters: [CheckedContinuation<TransferOutput, any Error>],
            gate: [CheckedContinuation<Void, Never>], finished: (@Sendable () -> Void)?
        )
        let taken = state.withLock { state -> Taken? in
            // `.finish` or `.finishAndRemove`: either way the caller gets `CancellationError`
            // now, and the task (the engine's part) is stopped.
            guard state.machine.cancel() != .none else { return nil }
            state.result = .failure(CancellationError())
            defer {
                state.waiters = []
                state.gate = []
                state.onFinish = nil
                state.task = nil
            }
            return (state.task, state.waiters, state.gate, state.onFinish)
        }
        guard let (task, waiters, gate, finished) = taken else { return }
        task?.cancel()
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
        for continuation in gate { continuation.resume() }
        finishReporters(succeeded: false)
        finished?()
    }

    func suspend() {
        // `.pause` needs nothing more: the running exchange waits at its next step.
        _ = state.withLock { $0.machine.suspend() }
    }

    func resume() {
        let (action, gate) = state.withLock { state in
            let action = state.machine.resume()
            return (action, state.takeGateIfOpen())
        }
        for continuation in gate { continuation.resume() }
        if action == .enqueue { enqueue() }
    }

    func setMaximumBytesPerSecond(_ rate: Int64?) {}

    func resumeReceiving() {
        let gate = state.withLock { state in
            state.receivePaused = false
            return state.takeGateIfOpen()
        }
        for continuation in gate { continuation.resume() }
    }

    var isFinished: Bool { state.withLock { $0.machine.isFinished } }

    func value(cancelsWithCaller: Bool) async throws -> TransferOutput {
        if cancelsWithCaller {
            return try await withTaskCancellationHandler {
                try await waitForResult()
            } onCancel: {
                self.cancel()
            }
        }
        return try await waitForResult()
    }

    private func waitForResult() async throws -> TransferOutput {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<TransferOutput, any Error>? in
                if let result = state.result { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Waits while the transfer is suspended or the sink is paused.
    private func passGate() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                guard state.isHeld, !state.machine.isFinished else { return true }
                state.gate.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }

    private func complete(_ result: Result<TransferOutput, any Error>) {
        let taken = state.withLock {
            state -> (waiters: [CheckedContinuation<TransferOutput, any Error>], finished: (@Sendable () -> Void)?)? in
            // `.discard`: the caller cancelled first and has its `CancellationError`.
            guard state.machine.complete() == .deliver else { return nil }
            state.result = result
            defer {
                state.waiters = []
                state.onFinish = nil
                state.task = nil
            }
            return (state.waiters, state.onFinish)
        }
        guard let (waiters, finished) = taken else { return }
        if case .success = result {
            finishReporters(succeeded: true)
        } else if request.failureEndsProgress {
            finishReporters(succeeded: false)
        }
        for waiter in waiters { waiter.resume(with: result) }
        finished?()
    }

    private func finishReporters(succeeded: Bool) {
        reporters?.finish(succeeded: succeeded)
    }

    // MARK: The exchange

    private func run() async {
        let started = ContinuousClock.now
        do {
            let output = try await exchange(started: started)
            complete(.success(output))
        } catch {
            complete(.failure(error))
        }
    }

    private func exchange(started: ContinuousClock.Instant) async throws -> TransferOutput {
        var current = request
        var hops: [TransactionMetrics] = []
        var sentBytes: Int64 = 0
        while true {
            try Task.checkCancellation()
            let body = try await readBody(current)
            sentBytes += Int64(body?.count ?? 0)
            guard let url = current.url else {
                throw CourierError.invalidURL(.init(message: "'\(current.urlString)' is not a valid URL"))
            }
            var sent = current.head
            // The engine has libcurl authenticate with a credential for the hop's origin; the
            // stub sends it as Basic (it does not run Digest or NTLM exchanges).
            if sent.headerFields[.authorization] == nil, let credential = current.credentials.credential(for: url) {
                sent.headerFields[.authorization] = Self.basic(credential)
            }
            // The proxy's credential, which the pipeline gives only when a proxy is configured,
            // as if the stub were the proxy too.
            if sent.headerFields[.proxyAuthorization] == nil, let credential = current.proxyCredential {
                sent.headerFields[.proxyAuthorization] = Self.basic(credential)
            }
            let recorded = RecordedRequest(
                request: sent, url: url, body: body, requestTimeout: current.sharedOptions.value.idleTimeout,
                resourceTimeout: current.sharedOptions.value.totalTimeout)
            var response: StubResponse
            do {
                response = try await stub.response(for: recorded)
            } catch let error as CourierError {
                throw error
            } catch {
                throw StubFailure.error(error).error(url: url, response: nil, body: nil)
            }
            if response.delay > .zero { try await Task.sleep(for: response.delay) }
            await passGate()
            try Task.checkCancellation()
            if !response.sendsHead, let failure = response.failure {
                _ = sink.end(.failed)
                throw failure.error(url: url, response: nil, body: nil)
            }
            let bodyLength = response.chunks.reduce(0) { $0 + $1.count }
            var fields = response.headerFields
            if fields[.contentLength] == nil, response.failure == nil, current.head.method != .head {
                fields[.contentLength] = String(bodyLength)
            }
            let httpResponse = HTTPResponse(status: response.status, headerFields: fields)
            let head = Self.recordedHead(httpResponse)
            current.observer?.transferReceivedHead(head, for: current.head)
            if current.sharedOptions.value.followRedirects, [301, 302, 303, 307, 308].contains(response.status.code),
                let location = fields[.location]
            {
                let target = URL(string: location, relativeTo: url)?.absoluteString ?? location
                if let next = try RedirectPolicy.nextRequest(
                    after: current, response: httpResponse, location: target, redirectCount: hops.count)
                {
                    current.observer?.transferRedirected(from: current.head, to: next.head, head: head)
                    var hop = TransactionMetrics(request: sent, response: httpResponse)
                    hop.httpVersion = "1.1"
                    hops.append(hop)
                    current = next
                    state.withLock { $0.redirectedRequest = next.head }
                    continue
                }
            }
            return try await deliver(
                response, head: head, to: current, sent: sent, sentBytes: sentBytes, hops: hops, started: started)
        }
    }

    /// Feeds the head and the chunks to the sink, with progress; then the failure, if any.
    private func deliver(
        _ response: StubResponse, head: RecordedHead, to request: TransferRequest, sent: HTTPRequest,
        sentBytes: Int64, hops: [TransactionMetrics], started: ContinuousClock.Instant
    ) async throws -> TransferOutput {
        let url = request.url
        let isHead = request.head.method == .head
        let expected: Int64? = response.failure == nil ? head.contentLength : nil
        if let failure = sink.begin(head, expectedLength: isHead ? nil : expected) {
            _ = sink.end(.failed)
            throw failure.withContext { if $0.url == nil { $0.url = url } }
        }
        let offset = sink.progressOffset
        if let reporters, reporters.head.isWanted, let response = head.response { reporters.head.arrived(response) }
        reporters?.download.update(completedBytes: offset, totalBytes: expected.map { $0 + offset })
        var received: Int64 = 0
        for (index, chunk) in (isHead ? [] : response.chunks).enumerated() {
            if index > 0, response.chunkDelay > .zero { try await Task.sleep(for: response.chunkDelay) }
            while true {
                await passGate()
                try Task.checkCancellation()
                let write = chunk.withUnsafeBytes { sink.write($0) }
                switch write {
                case .accepted:
                    break
                case .pause:
                    state.withLock { $0.receivePaused = true }
                    continue
                case .failed(let error):
                    _ = sink.end(.failed)
                    throw error.withContext { if $0.url == nil { $0.url = url } }
                }
                break
            }
            if sink.needsFlush { sink.flush() }
            received += Int64(chunk.count)
            reporters?.download.update(completedBytes: offset + received, totalBytes: expected.map { $0 + offset })
        }
        if let failure = response.failure {
            let collected = sink.end(.failed)
            throw failure.error(url: url, response: head.response, body: collected.isEmpty ? nil : collected)
        }
        if let incomplete = sink.checkComplete() {
            _ = sink.end(.failed)
            throw incomplete.withContext { if $0.url == nil { $0.url = url } }
        }
        // The final hop's figures; its request and head are added where the response is made.
        var last = TransactionMetrics(request: sent, response: nil)
        last.bytesReceived = received
        last.bytesSent = sentBytes
        last.httpVersion = "1.1"
        var metrics = TransferMetrics(figuresOf: last, after: hops[...], redirectCount: hops.count)
        metrics.totalDuration = ContinuousClock.now - started
        return TransferOutput(request: request.head, head: head, body: sink.end(.completed), metrics: metrics)
    }

    /// `credential` as a Basic `Authorization` (or `Proxy-Authorization`) value.
    private static func basic(_ credential: Credential) -> String {
        "Basic " + Data("\(credential.user):\(credential.password)".utf8).base64EncodedString()
    }

    /// Reads the request body as the engine would send it, with upload progress.
    private func readBody(_ request: TransferRequest) async throws -> Data? {
        guard let body = request.body else { return nil }
        let reader = body.makeReader()
        defer { reader.close() }
        let readable = ReadableSignal()
        reader.onReadable = { readable.fire() }
        let total = body.length
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let read = buffer.withUnsafeMutableBytes { reader.read(into: $0) }
            switch read {
            case .bytes(0):
                reporters?.upload.update(completedBytes: Int64(data.count), totalBytes: total)
                return data
            case .bytes(let count):
                data.append(contentsOf: buffer[0..<count])
                reporters?.upload.update(completedBytes: Int64(data.count), totalBytes: total)
            case .wait:
                await readable.wait()
            case .failed(let error):
                throw error
            }
        }
    }

    /// `response` as the engine records a head: the status line and fields, parsed.
    static func recordedHead(_ response: HTTPResponse) -> RecordedHead {
        var parser = RecordedHead()
        var lines = ["HTTP/1.1 \(response.status.code) \(response.status.reasonPhrase)\r\n"]
        for field in response.headerFields { lines.append("\(field.name.rawName): \(field.value)\r\n") }
        lines.append("\r\n")
        for line in lines {
            var bytes = Array(line.utf8)
            _ = bytes.withUnsafeMutableBytes { parser.consume(UnsafeRawBufferPointer($0)) }
        }
        return parser
    }
}

/// Wakes the task reading a stream body when the stream has bytes again (a wakeup that comes
/// before the wait is kept).
private final class ReadableSignal: Sendable {
    private let state = Locked<(fired: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func fire() {
        let waiter = state.withLock { state in
            defer { state.waiter = nil }
            if state.waiter == nil { state.fired = true }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.fired {
                    state.fired = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
