import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import Logging
import Synchronization

/// Runs one curl multi handle on a thread of its own.
///
/// Threading: the engine thread (`courier-engine`) makes every libcurl call for the multi
/// handle and its easy handles. Other threads talk to it only through `submit(_:)`: it appends
/// a command to the `inbox` (a `Locked`) and signals an eventfd that sits in the same epoll set
/// as libcurl's sockets; the signal is skipped while one is pending, so a burst of submissions
/// costs one wakeup.
///
/// The loop drives libcurl with `curl_multi_socket_action`: libcurl says which sockets to watch
/// (CURLMOPT_SOCKETFUNCTION) and when to time out (CURLMOPT_TIMERFUNCTION), and each wakeup
/// touches only the transfers with work, so the cost of a wakeup does not grow with the number
/// of transfers in flight (the 10,000-transfer target). libcurl 7.88 removes a keep-alive
/// socket from its interest set when a transfer ends and adds it back for the next one; the
/// engine keeps such sockets registered while idle ("parked", see `watch(socket:what:easy:)`), which
/// saves two `epoll_ctl` calls per request. `curl_multi_poll` is no faster at 64 transfers in
/// flight (Documentation/Benchmarks.md, "Measurements behind the code").
///
/// `@unchecked Sendable`: `inbox` is guarded by its lock (which also orders closing the eventfd
/// with the last signal); every other `var` is touched only on the engine thread.
package final class CurlEngine: @unchecked Sendable {
    enum Command {
        /// Runs on the engine thread (cookie store operations).
        case run(@Sendable (CurlEngine) -> Void)
        case add(Transfer)
        /// A transfer that waited for a place under the session's limit on transfers at once,
        /// and holds one now (see `AdmissionQueue`).
        case addAdmitted(Transfer)
        /// Cancelled by the caller: take it off the multi handle.
        case remove(Transfer)
        /// Cancelled by the caller before it ran: take it off the session's queue, if it waits
        /// there, so that it (and its body) is let go of now.
        case withdraw(Transfer)
        /// `suspend()` or `resume()`: pause or unpause as the transfer's state machine says now,
        /// not as the command was sent (two commands from two threads may arrive in either
        /// order; the state holds the last call).
        case applySuspension(Transfer)
        /// A byte stream's consumer caught up.
        case resumeReceiving(Transfer)
        /// The request body stream has bytes again.
        case resumeSending(Transfer)
        case setRate(Transfer, Int64?)
    }

    /// A transfer's result (nil once handed over) and the continuations waiting for it.
    typealias Delivery = (
        result: Result<TransferOutput, any Error>?, waiters: TransferWaiters
    )

    private struct Inbox {
        var commands: [Command] = []
        /// A wakeup is pending (or the loop has not polled since the last one).
        var signalled = false
        var shuttingDown = false
        /// The eventfd that wakes the loop; -1 once closed by `tearDown`.
        var wakeFD: Int32
    }

    package struct Limits: Sendable {
        var maximumConnectionsPerHost = 6
        var maximumTotalConnections = 0
        /// `CURLMOPT_MAX_CONCURRENT_STREAMS`: HTTP/2 streams on one connection at most.
        var maximumStreamsPerConnection = 1000
        /// Transfers on the multi handle at once; further ones wait their turn. 0: no limit.
        var maximumConcurrentTransfers = 0
        /// Bytes per second shared by every transfer of the session, both directions; nil: none.
        var maximumBytesPerSecond: Int64?
        /// The cookie engine: nil for none (no transfer of the session handles cookies).
        var cookies: CookieSettings?
        /// How the session's connections are opened, for those no request's options decide
        /// (a WebSocket's; see `transferOpenSocketCallback`).
        var socket: SocketOptions

        /// Enough idle connections for every host the session talks to at full width, up to
        /// the total limit when there is one.
        package init(
            maximumConnectionsPerHost: Int = 6, maximumTotalConnections: Int = 0,
            maximumStreamsPerConnection: Int = 1000, maximumConcurrentTransfers: Int = 0,
            maximumBytesPerSecond: Int64? = nil, cookies: CookieSettings? = nil, socket: SocketOptions = SocketOptions()
        ) {
            self.socket = socket
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.maximumTotalConnections = maximumTotalConnections
            self.maximumStreamsPerConnection = maximumStreamsPerConnection
            self.maximumConcurrentTransfers = maximumConcurrentTransfers
            self.maximumBytesPerSecond = maximumBytesPerSecond
            self.cookies = cookies
        }

        var idleConnectionCacheSize: Int {
            maximumTotalConnections > 0
                ? maximumTotalConnections : max(64, min(max(maximumConnectionsPerHost, 0), 1 << 20) * 8)
        }
    }

    package struct CookieSettings: Sendable {
        /// The cookie file of a default session; nil keeps cookies in memory.
        var jar: URL?
        var policy: CookieAcceptPolicy
        /// Hears of jar lines that were dropped.
        var logger: Logger?

        package init(jar: URL?, policy: CookieAcceptPolicy, logger: Logger?) {
            self.jar = jar
            self.policy = policy
            self.logger = logger
        }
    }

    private let inbox: Locked<Inbox>
    let limits: Limits
    let epollFD: Int32
    private let wakeFD: Int32

    // The engine thread's own (`@EngineConfined`: checked in debug builds).
    @EngineConfined private var multi: UnsafeMutableRawPointer?
    /// The transfers on the multi handle; each knows its place (`Transfer.activeIndex`).
    @EngineConfined private var active: [Transfer] = []
    @EngineConfined private var handles = EasyHandlePool()
    /// Error buffers (`CURL_ERROR_SIZE` bytes) lent to transfers while they hold a handle
    /// (`add` to `detach`): one set of them for the engine's life instead of one per request.
    @EngineConfined private var idleErrorBuffers: [UnsafeMutablePointer<CChar>] = []
    /// Each socket in the epoll set: the interest (`CURL_POLL_*`) it is registered with, and
    /// whether libcurl has stopped watching it ("parked"); and which sockets are connections,
    /// opened through CURLOPT_OPENSOCKETFUNCTION: libcurl tells us when it closes them
    /// (CURLOPT_CLOSESOCKETFUNCTION), so they may stay in the epoll set while idle.
    @EngineConfined var sockets = SocketTable()
    @EngineConfined private var timerDeadline: UInt64?
    /// The commands taken from the inbox this turn (see `takeCommands`).
    @EngineConfined private var taken: [Command] = []
    /// What the session's engines share: cookies, TLS sessions, DNS answers, the bandwidth limit.
    let shares: SessionShares
    /// The session's limit on transfers at once, when it has one (shared by its engines).
    private let admission: AdmissionQueue<Transfer>?
    /// The session-wide bandwidth limit, consulted by the callbacks.
    var sessionBandwidth: SessionBandwidth? { shares.bandwidth }
    /// The session's cookie engine, when it handles cookies.
    package var cookies: CookieEngine? { shares.cookies }
    /// Transfers submitted to this engine and not yet ended (queued, waiting for a place,
    /// running): what placement compares engines by. Changed by the caller's side when it
    /// submits and by the engine thread when a transfer leaves.
    let submitted = Atomic<Int>(0)
    /// Transfers whose callbacks answered "pause" for receiving during this turn of the loop.
    @EngineConfined private var receivingPaused: [Transfer] = []
    /// Transfers whose sinks hold bytes back until the end of this turn of the loop.
    @EngineConfined private var flushes: [Transfer] = []
    /// Transfers paused by the bandwidth limit, and when they may go on.
    @EngineConfined private var throttled = ThrottleSchedule<Transfer>()
    /// libcurl's parse of the URLs requested lately.
    @EngineConfined private var parsedURLs = ParsedURLCache()
    /// Results published during this turn of the loop, for their waiters (see `deliver`).
    @EngineConfined private var deliveries: [Delivery] = []
    /// libcurl's lists of the session's address overrides.
    @EngineConfined private var overrideLists = AddressOverrideLists()
    /// The multi handles that connect WebSockets (see `WebSocketMulti`), made on demand.
    @EngineConfined var webSocketMultis: [WebSocketMulti] = []
    /// The engine's WebSocket connections, from their start to their end.
    @EngineConfined var webSockets: [ObjectIdentifier: WebSocketConnection] = [:]
    /// Connected WebSockets by their socket.
    @EngineConfined var webSocketsBySocket: [Int32: WebSocketConnection] = [:]
    /// What waits for a time on this engine besides libcurl's own timer (see `DeadlineHeap`).
    @EngineConfined var deadlines = DeadlineHeap()
    /// What WebSockets read into (see `webSocketReadBuffer()`).
    @EngineConfined var webSocketBuffer: UnsafeMutableRawBufferPointer?
    /// What coded bodies are decoded into on their way to their sinks, made on first use.
    @EngineConfined private var decodingBuffer: UnsafeMutableRawBufferPointer?

    /// The `CURLOPT_RESOLVE` and `CURLOPT_CONNECT_TO` lists for `overrides`. Engine thread.
    func overrideLines(_ overrides: [AddressOverride]) -> AddressOverrideLists.Lists {
        overrideLists.lists(for: overrides)
    }

    /// An engine of a session: `limits` are this engine's share of the session's (see
    /// `EnginePlacement`), `shares` and `admission` are the session's.
    init(limits: Limits, shares: SessionShares, admission: AdmissionQueue<Transfer>?, name: String) {
        _ = CurlRuntime.initialized
        self.limits = limits
        self.shares = shares
        self.admission = admission
        epollFD = courier_epoll_create()
        precondition(epollFD >= 0, "epoll_create1 failed: errno \(errno)")
        wakeFD = courier_wakeup_create(epollFD)
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
        inbox = Locked(Inbox(wakeFD: wakeFD))
        let thread = Thread { [self] in
            courier_set_thread_name(name)
            EngineThread.enter(self)
            self.run()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// An engine on its own: a session of one engine (tests).
    package convenience init(limits: Limits, name: String = "courier-engine") {
        let shares = SessionShares(
            engineCount: 1, cookies: limits.cookies, maximumBytesPerSecond: limits.maximumBytesPerSecond)
        let admission =
            limits.maximumConcurrentTransfers > 0
            ? AdmissionQueue<Transfer>(limit: limits.maximumConcurrentTransfers) : nil
        self.init(limits: limits, shares: shares, admission: admission, name: name)
    }

    /// Transfers submitted to this engine and not yet ended: its load, for placement.
    var load: Int { submitted.load(ordering: .relaxed) }

    /// Submits `transfer` to be added (its start, or its resume after a suspension before it
    /// ran), counting it in the load; false once the engine is shutting down.
    func submitAdd(_ transfer: Transfer) -> Bool {
        submitted.add(1, ordering: .relaxed)
        guard submit(.add(transfer)) else {
            submitted.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Queues a command for the engine thread. Returns false once the engine is shutting down.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        // The wakeup is written under the lock: `tearDown` closes the eventfd under the same
        // lock, so a wakeup never reaches a closed (or reused) descriptor.
        inbox.withLock { inbox in
            guard !inbox.shuttingDown else { return false }
            inbox.commands.append(command)
            if !inbox.signalled {
                inbox.signalled = true
                courier_wakeup_signal(inbox.wakeFD)
            }
            return true
        }
    }

    /// Asks the engine to cancel every transfer, clean up libcurl and end its thread. Returns
    /// at once; the thread keeps `self` alive until `curl_multi_cleanup` has returned.
    package func shutdown() {
        inbox.withLock { inbox in
            guard !inbox.shuttingDown else { return }
            inbox.shuttingDown = true
            courier_wakeup_signal(inbox.wakeFD)
        }
    }

    // MARK: - The loop (engine thread)

    private func run() {
        let multi = CurlRuntime.handle(curl_multi_init)!
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        courier_multi_setopt_socket_function(multi, engineSocketCallback)
        courier_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        courier_multi_setopt_timer_function(multi, engineTimerCallback)
        courier_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        courier_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, limits.maximumConnectionsPerHost)
        courier_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, limits.maximumTotalConnections)
        courier_multi_setopt_long(
            multi, CURLMOPT_MAX_CONCURRENT_STREAMS, min(max(limits.maximumStreamsPerConnection, 1), Int(Int32.max)))
        // The idle-connection cache. libcurl's default (four per easy handle on the multi
        // handle) shrinks whenever transfers finish, closing keep-alive connections that the
        // next requests then open again; size it from the connection limits instead.
        courier_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, limits.idleConnectionCacheSize)

        let capacity = 256
        let events = UnsafeMutablePointer<courier_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        var running: Int32 = 0
        var stop = false
        while !stop {
            let count = courier_epoll_wait(epollFD, events, Int32(capacity), pollTimeout())
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("epoll_wait failed: errno \(errno)")
            }
            var woken = false
            for index in 0..<Int(count) {
                let event = events[index]
                if event.fd == wakeFD {
                    woken = true
                } else if sockets[event.fd].owner != .transfers {
                    webSocketSocketReady(event.fd, events: Int32(event.events))
                } else if sockets[event.fd].interest != nil {
                    if sockets[event.fd].parked {
                        // An idle keep-alive connection became readable: the server closed it,
                        // or sent bytes nobody asked for. Those must never be read as the
                        // answer to the next request (a response that comes before its request
                        // was sent is a smuggled one, and poisons caches), and libcurl 7.88
                        // reuses a connection with input waiting. So the connection is retired:
                        // drained and shut down, which libcurl sees as closed when it next
                        // considers it. libcurl is not watching it: stop reporting it.
                        sockets[event.fd].interest = nil
                        sockets[event.fd].parked = false
                        courier_epoll_unwatch(epollFD, event.fd)
                        courier_socket_retire(event.fd)
                    } else {
                        curl_multi_socket_action(multi, event.fd, Int32(event.events), &running)
                    }
                }
            }
            if woken {
                courier_wakeup_drain(wakeFD)
                stop = takeCommands()
                for command in taken { perform(command) }
                taken.removeAll(keepingCapacity: true)
            }
            if !throttled.isEmpty { releaseThrottled() }
            if !deadlines.isEmpty { fireDeadlines() }
            if let deadline = timerDeadline, courier_monotonic_nanoseconds() >= deadline {
                // Cleared first: socket_action may set a new timer through the timer callback.
                timerDeadline = nil
                curl_multi_socket_action(multi, courier_socket_timeout, 0, &running)
            }
            readCompletions()
            flushSinks()
            holdPausedInput()
            resumeWaiters()
        }
        tearDown()
        resumeWaiters()
    }

    /// Hands a transfer's result to its waiters at the end of this turn of the loop. Resuming
    /// a continuation enqueues its task on the global executor, which wakes a sleeping pool
    /// thread; one turn often finishes dozens of transfers, and resuming them together wakes
    /// the pool once or twice instead of once per transfer (each a futex call and a context
    /// switch, on both sides). Engine thread.
    func deliver(
        _ result: consuming Result<TransferOutput, any Error>,
        to waiters: TransferWaiters
    ) {
        guard !waiters.isEmpty else { return }
        deliveries.append((result, waiters))
    }

    private func resumeWaiters() {
        guard !deliveries.isEmpty else { return }
        // Each result is taken out of the list and moved into its (usually one) waiter.
        for index in deliveries.indices {
            guard let result = deliveries[index].result.take() else { continue }
            deliveries[index].waiters.resume(with: result)
        }
        deliveries.removeAll(keepingCapacity: true)
    }

    /// Milliseconds until libcurl's timer, the next throttled transfer or the next of the
    /// engine's `deadlines`, rounded up; -1 when there is none.
    private func pollTimeout() -> Int32 {
        var earliest = timerDeadline
        if let throttle = throttled.earliestDeadline, throttle < earliest ?? .max { earliest = throttle }
        if let deadline = deadlines.earliestDeadline, deadline < earliest ?? .max { earliest = deadline }
        guard let deadline = earliest else { return -1 }
        let now = courier_monotonic_nanoseconds()
        guard deadline > now else { return 0 }
        return Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
    }

    /// Moves the queued commands into `taken` and clears the wakeup flag, so the next submission
    /// wakes us. Returns whether the engine is shutting down.
    private func takeCommands() -> Bool {
        inbox.withLock { inbox in
            // Swapped, not copied: both arrays keep their storage from turn to turn.
            swap(&inbox.commands, &taken)
            inbox.signalled = false
            return inbox.shuttingDown
        }
    }

    private func perform(_ command: Command) {
        switch command {
        case .run(let work): work(self)
        case .add(let transfer): add(transfer)
        case .addAdmitted(let transfer): add(transfer, admitted: true)
        case .remove(let transfer): detach(transfer)
        case .withdraw(let transfer): withdraw(transfer)
        case .applySuspension(let transfer):
            transfer.pause.suspended = transfer.isSuspendedWhileRunning
            applyPause(transfer)
        case .resumeReceiving(let transfer):
            transfer.pause.receiveBackpressure = false
            applyPause(transfer)
        case .resumeSending(let transfer):
            transfer.pause.sendWaiting = false
            applyPause(transfer)
        case .setRate(let transfer, let rate):
            transfer.bandwidth = rate.map(BandwidthBucket.init(bytesPerSecond:))
            if rate == nil {
                // No limit any more: a pause the transfer's own bucket caused ends now.
                throttled.remove(transfer)
                transfer.pause.receiveThrottled = false
                transfer.pause.sendThrottled = false
                applyPause(transfer)
            }
        }
    }

    /// Tells libcurl the directions the transfer's pause reasons leave paused, when that
    /// changed. Unpausing may call the write callback at once with bytes libcurl held back.
    private func applyPause(_ transfer: Transfer) {
        guard let easy = transfer.easy else { return }
        let mask = transfer.pause.mask
        guard mask != transfer.appliedPauseMask else { return }
        transfer.appliedPauseMask = mask
        curl_easy_pause(easy, mask)
        updateInputHold(transfer)
    }

    /// A callback answered "pause" for `transfer`'s receiving: its input is held at the end of
    /// this turn (`updateInputHold`), once libcurl has returned. Engine thread.
    func noteReceivingPaused(_ transfer: Transfer) {
        receivingPaused.append(transfer)
    }

    private func holdPausedInput() {
        guard !receivingPaused.isEmpty else { return }
        for transfer in receivingPaused where transfer.activeIndex >= 0 { updateInputHold(transfer) }
        receivingPaused.removeAll(keepingCapacity: true)
    }

    /// libcurl's parse of `url` (see `ParsedURLCache`); nil when libcurl does not accept the
    /// URL. Engine thread.
    func parsedURL(for url: String) -> ParsedURL? {
        parsedURLs.parsed(url)
    }

    /// The space a coded body is decoded into, piece by piece, before its sink takes it: one
    /// for the engine, since only one callback runs at a time on its thread. Engine thread.
    func decodingScratch() -> UnsafeMutableRawBufferPointer {
        if let buffer = decodingBuffer { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        decodingBuffer = buffer
        return buffer
    }

    /// Flushes `transfer`'s sink at the end of this turn. Engine thread.
    func scheduleFlush(_ transfer: Transfer) {
        flushes.append(transfer)
    }

    private func flushSinks() {
        guard !flushes.isEmpty else { return }
        for transfer in flushes {
            transfer.flushScheduled = false
            if !transfer.sinkEnded { transfer.sink.flush() }
        }
        flushes.removeAll(keepingCapacity: true)
    }

    /// The bandwidth limit paused `transfer`: let it go on at `deadline`. Engine thread.
    func wake(_ transfer: Transfer, at deadline: UInt64) {
        throttled.wake(transfer, at: deadline)
    }

    private func releaseThrottled() {
        for transfer in throttled.takeDue(now: courier_monotonic_nanoseconds()) {
            transfer.pause.receiveThrottled = false
            transfer.pause.sendThrottled = false
            applyPause(transfer)
        }
    }

    /// Puts a transfer on the multi handle, when the session's limit on transfers at once has
    /// a place for it (`admitted`: it was given one already); otherwise it waits in the
    /// session's `AdmissionQueue`.
    private func add(_ transfer: Transfer, admitted: Bool = false) {
        EngineThread.check(self, "CurlEngine.add")
        if !admitted, let admission, !admission.admit(transfer, priority: transfer.current.priority) {
            if let deadline = transfer.callDeadline {
                transfer.waitsForPlace = true
                deadlines.schedule(transfer, at: deadline)
            }
            return
        }
        transfer.waitsForPlace = false
        guard transfer.engineWillAdd() == .add else {
            // Cancelled, or suspended before it ran (a resume submits it again).
            submitted.subtract(1, ordering: .relaxed)
            releasePlace()
            return
        }
        let easy = handles.take(for: transfer)
        transfer.easy = easy
        transfer.errorBuffer = idleErrorBuffers.popLast() ?? .allocate(capacity: Int(CURL_ERROR_SIZE))
        transfer.beginHop()
        transfer.activeIndex = active.count
        active.append(transfer)
        guard configure(transfer, easy) else { return }
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            detach(transfer, .failed)
            let message = String(cString: curl_multi_strerror(code))
            transfer.complete(
                with: .failure(CourierError.transport(.init(url: transfer.current.url, message: message))))
        }
    }

    /// Configures `easy` for `transfer`'s current hop; when that fails (a file body that
    /// cannot be opened, say), lets the transfer go with the error and returns false.
    private func configure(_ transfer: Transfer, _ easy: UnsafeMutableRawPointer) -> Bool {
        do {
            try transfer.configure(easy)
            return true
        } catch {
            detach(transfer, .failed)
            transfer.complete(with: .failure(error))
            return false
        }
    }

    /// Takes the transfer's easy handle off the multi handle, keeps the handle for reuse, ends
    /// the sink (if the outcome did not already), and lets a waiting transfer take the place.
    private func detach(_ transfer: Transfer, _ outcome: SinkOutcome = .cancelled) {
        EngineThread.check(self, "CurlEngine.detach")
        guard let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, easy)
        transfer.easy = nil
        transfer.parsedURL = nil  // released here, on the engine thread
        // Swap-remove: the last transfer takes this one's place.
        let index = transfer.activeIndex
        let last = active.removeLast()
        if last !== transfer {
            active[index] = last
            last.activeIndex = index
        }
        transfer.activeIndex = -1
        throttled.remove(transfer)
        _ = transfer.endSink(outcome)
        if let buffer = transfer.errorBuffer {
            // The handle must not point at a buffer that another transfer may be lent next.
            courier_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, nil)
            transfer.errorBuffer = nil
            if idleErrorBuffers.count < EasyHandlePool.limit {
                idleErrorBuffers.append(buffer)
            } else {
                buffer.deallocate()
            }
        }
        handles.giveBack(easy, after: transfer)
        submitted.subtract(1, ordering: .relaxed)
        releasePlace()
    }

    /// Takes a transfer that waits for a place off the session's queue: the session's limit
    /// when it did, nil when the transfer was not waiting there. Engine thread (the transfer's).
    func withdrawFromQueue(_ transfer: Transfer) -> Int? {
        guard let admission, admission.remove(transfer, priority: transfer.current.priority) else { return nil }
        submitted.subtract(1, ordering: .relaxed)
        return admission.limit
    }

    /// A transfer cancelled before it ran: off the queue, if it waits there.
    private func withdraw(_ transfer: Transfer) {
        transfer.waitsForPlace = false
        _ = withdrawFromQueue(transfer)
    }

    /// A transfer that held a place under the session's limit on transfers at once let it go:
    /// the next waiting transfer, on whichever engine, takes it.
    private func releasePlace() {
        guard let admission else { return }
        while let next = admission.release() {
            if next.engine.submit(.addAdmitted(next)) { return }
            next.cancel()  // its engine is shutting down; the place goes on to the next
        }
    }

    private func readCompletions() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var pointer: UnsafeMutableRawPointer?
            courier_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer else { continue }
            finish(Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue(), easy: easy, code: code)
        }
    }

    private func finish(_ transfer: Transfer, easy: UnsafeMutableRawPointer, code: CURLcode) {
        let options = transfer.current.sharedOptions  // the object: its fields are read in place
        if options.limitsConnections { retireIfSpent(transfer, easy) }
        if let cookies, transfer.head.hasSetCookie, options.value.handlesCookies,
            let url = transfer.current.url
        {
            cookies.responseSetCookies(transfer.head.values(of: "set-cookie"), from: url)
        }
        if let store = transfer.current.altServices { transfer.noteAlternativeServices(store, easy) }
        if transfer.isFinished {
            detach(transfer)  // cancelled meanwhile; the caller already has its answer
            return
        }
        switch TransferOutcome.evaluate(transfer, easy: easy, code: code) {
        case .redirect(let next):
            next.observer?.transferRedirected(from: transfer.current.head, to: next.head, head: transfer.head)
            transfer.earlierHops.append(TransferOutcome.transaction(transfer, easy))
            curl_multi_remove_handle(multi, easy)
            // The next hop may change method and body: start from libcurl's defaults.
            EasyHandlePool.reset(easy)
            transfer.handleIsClean = false
            transfer.passesTransferCodingsThrough = false
            transfer.current = next
            transfer.noteRedirect(to: next.head)
            transfer.prepared = PreparedHop(next)
            transfer.redirectCount += 1
            transfer.beginHop()
            guard configure(transfer, easy) else { return }
            curl_multi_add_handle(multi, easy)
        case .resendPassingTransferCodings:
            // The exchange that went out is one of the transfer's (Transfer.unknownTransferCoding).
            transfer.earlierHops.append(TransferOutcome.transaction(transfer, easy))
            curl_multi_remove_handle(multi, easy)
            EasyHandlePool.reset(easy)
            transfer.handleIsClean = false
            transfer.passesTransferCodingsThrough = true
            transfer.beginHop()
            guard configure(transfer, easy) else { return }
            curl_multi_add_handle(multi, easy)
        case .done(let result):
            detach(transfer, .completed)  // the outcome already ended the sink
            transfer.complete(with: result)
        }
    }

    private func tearDown() {
        for transfer in active {
            transfer.cancel()
            detach(transfer)
        }
        // Commands that arrived after the last pass: cancelled. (Transfers waiting for a place
        // are the session's: `EngineGroup.shutdown` cancels them.)
        _ = takeCommands()
        for command in taken {
            switch command {
            case .add(let transfer), .addAdmitted(let transfer): transfer.cancel()
            case .run(let work): work(self)  // answers its caller (the engine still exists)
            default: break
            }
        }
        closeWebSockets()
        handles.removeAll()
        for buffer in idleErrorBuffers { buffer.deallocate() }
        idleErrorBuffers.removeAll()
        parsedURLs.removeAll()
        // Socket callbacks can still fire in here; `self` is alive (this thread holds it).
        curl_multi_cleanup(multi)
        multi = nil
        decodingBuffer?.deallocate()
        decodingBuffer = nil
        shares.engineEnded()  // every easy handle of this engine has left the shares
        inbox.withLock { inbox in
            close(inbox.wakeFD)
            inbox.wakeFD = -1
        }
        close(epollFD)
    }

    // MARK: - libcurl multi callbacks (engine thread)

    /// Mirrors libcurl's interest in a socket into the epoll set with as few `epoll_ctl` calls
    /// as possible. libcurl 7.88 removes a keep-alive connection's socket when its transfer ends
    /// and adds it again for the next one; a connection socket is therefore only "parked" on
    /// removal, and taken back without a system call when the interest is the same.
    ///
    /// libcurl also removes the socket of a transfer it pauses in both directions. That socket
    /// is not idle: what arrives on it is the paused response, kept in the kernel until the
    /// transfer resumes. It is taken out of the epoll set (a level-triggered readable socket
    /// nobody reads would wake every turn) and never parked, so it is never retired.
    fileprivate func watch(socket: Int32, what: Int32, easy: UnsafeMutableRawPointer?) {
        var entry = sockets[socket]
        if what == CURL_POLL_REMOVE {
            entry.requested = 0
            entry.heldInput = false
            guard entry.interest != nil else {
                sockets[socket] = entry
                return
            }
            if entry.isConnection && !isPaused(easy) {
                // Parked for input only: a socket left registered for output (libcurl 8 may
                // remove one whose last interest included it) is writable at once, and any
                // event on a parked socket retires its connection.
                if entry.interest != Int32(CURL_POLL_IN) {
                    courier_epoll_set(epollFD, socket, Int32(CURL_POLL_IN), 0)
                    entry.interest = Int32(CURL_POLL_IN)
                }
                entry.parked = true
            } else {
                // Not ours to track (e.g. the resolver's socket pair), or a paused transfer's
                // connection: out of the set until libcurl asks for it again.
                entry.interest = nil
                courier_epoll_unwatch(epollFD, socket)
            }
            sockets[socket] = entry
            return
        }
        entry.requested = what
        entry.parked = false
        if let transfer = transfer(of: easy) {
            transfer.socket = socket
            entry.easy = easy
            entry.heldInput = holdsInput(transfer)
        }
        register(&entry, socket)
        sockets[socket] = entry
    }

    /// Puts the socket in the epoll set with the interest libcurl asked for, without input
    /// while it is held; takes it out when that leaves nothing.
    private func register(_ entry: inout SocketTable.Entry, _ socket: Int32) {
        let wanted = entry.heldInput ? entry.requested & ~Int32(CURL_POLL_IN) : entry.requested
        let previous = entry.interest
        guard wanted != 0 else {
            if previous != nil { courier_epoll_unwatch(epollFD, socket) }
            entry.interest = nil
            return
        }
        entry.interest = wanted
        guard previous != wanted else { return }
        let add: Int32 = previous == nil ? 1 : 0
        if courier_epoll_set(epollFD, socket, wanted, add) != 0 {
            // Out of step with the kernel (a descriptor closed and reused): the other operation.
            courier_epoll_set(epollFD, socket, wanted, 1 - add)
        }
    }

    /// Whether the input of `transfer`'s connection is to be held: its receiving is paused, and
    /// the connection is its own. libcurl 7.x and 8.6 on stop watching a socket whose transfer
    /// paused receiving; 8.5.0 keeps reading it into its pause buffer, up to 64 MiB, and then
    /// fails the transfer (curl/curl#12632), so the engine holds the input itself, on every
    /// version. Not on a multiplexed (HTTP/2) connection: its other streams go on, and libcurl
    /// holds a paused stream back by HTTP/2's flow control.
    private func holdsInput(_ transfer: Transfer) -> Bool {
        guard transfer.appliedPauseMask & Int32(CURLPAUSE_RECV) != 0, let easy = transfer.easy else { return false }
        var version = 0
        courier_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case CURL_HTTP_VERSION_1_0, CURL_HTTP_VERSION_1_1: return true
        case 0: return !transfer.hop.mayMultiplex  // nothing received yet
        default: return false
        }
    }

    /// Holds or releases the input of `transfer`'s connection as its pause now says (after
    /// `curl_easy_pause`, or a callback that answered "pause"). Engine thread.
    func updateInputHold(_ transfer: Transfer) {
        guard let easy = transfer.easy else { return }
        // The connection libcurl last watched for this transfer.
        var socket: Int32 = -1
        if transfer.socket >= 0, sockets[transfer.socket].easy == easy { socket = transfer.socket }
        guard socket >= 0 else { return }
        var entry = sockets[socket]
        guard entry.owner == .transfers else { return }
        let held = holdsInput(transfer)
        guard held != entry.heldInput else { return }
        entry.heldInput = held
        register(&entry, socket)
        sockets[socket] = entry
    }

    /// The transfer whose easy handle `easy` is, if it is one of this engine's.
    private func transfer(of easy: UnsafeMutableRawPointer?) -> Transfer? {
        guard let easy else { return nil }
        var pointer: UnsafeMutableRawPointer?
        courier_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer)
        guard let pointer else { return nil }
        return Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Whether `easy` (the handle a socket callback names) belongs to a transfer that has a
    /// direction paused. Every easy handle in the multi handle points at its live transfer.
    private func isPaused(_ easy: UnsafeMutableRawPointer?) -> Bool {
        guard let easy else { return false }
        var pointer: UnsafeMutableRawPointer?
        courier_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer)
        guard let pointer else { return false }
        return Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue().appliedPauseMask != 0
    }

    /// CURLOPT_OPENSOCKETFUNCTION: a connection socket is born.
    ///
    /// Only a TCP connection's socket is parked when idle (and retired if it turns readable).
    /// A QUIC connection's UDP socket is not: an idle QUIC connection hears from its server
    /// routinely (acknowledgements, new connection IDs, session tickets), which is no sign of
    /// a closed or misbehaving connection, and libcurl reads it when the connection is next
    /// used. Retiring it made every pause between requests cost a new QUIC handshake.
    fileprivate func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>, _ options: SocketOptions) -> Int32 {
        let socket = options.multipath ? courier_open_multipath_socket(address) : courier_open_socket(address)
        if socket >= 0 {
            // The type without its flags: libcurl 8.x passes SOCK_CLOEXEC in it too.
            let isStream = address.pointee.socktype & 0xF == Int32(SOCK_STREAM.rawValue)
            if isStream, let timeout = options.userTimeout {
                courier_socket_set_user_timeout(socket, UInt32(clamping: max(timeout.curlMilliseconds, 1)))
            }
            var entry = SocketTable.Entry(interest: nil, parked: false, isConnection: isStream)
            entry.opened = courier_monotonic_nanoseconds()
            sockets[socket] = entry
        }
        return socket
    }

    /// A transfer of a session that limits its connections' age or requests ended on `easy`'s
    /// connection: the transfer is counted, and a spent HTTP/1 connection is retired at once
    /// (`courier_socket_retire`: libcurl sees a connection the server closed when it next
    /// considers reusing it), so the next request opens a new one. libcurl names the
    /// connection only now (`CURLINFO_ACTIVESOCKET` is the last connection a transfer used,
    /// set when libcurl is done with it) and only if it keeps it. A multiplexed connection is
    /// left alone: libcurl gives it new streams while others run. An idle connection that
    /// reaches its age later is libcurl's to refuse (`CURLOPT_MAXLIFETIME_CONN`, 7.80 on, set
    /// with the transfer's options). Engine thread.
    private func retireIfSpent(_ transfer: Transfer, _ easy: UnsafeMutableRawPointer) {
        var version = 0
        courier_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        guard version == CURL_HTTP_VERSION_1_0 || version == CURL_HTTP_VERSION_1_1 else { return }
        guard let socket = TransferOutcome.activeSocket(easy), sockets[socket].isConnection else { return }
        sockets[socket].transfers += 1
        let entry = sockets[socket]
        var spent = false
        if let maximum = transfer.current.sharedOptions.value.maximumRequestsPerConnection {
            spent = entry.transfers >= maximum
        }
        if let age = transfer.current.sharedOptions.value.maximumConnectionAge {
            spent = spent || courier_monotonic_nanoseconds() - entry.opened >= UInt64(age.curlSeconds) * 1_000_000_000
        }
        if spent { courier_socket_retire(socket) }
    }

    /// CURLOPT_CLOSESOCKETFUNCTION: a connection socket dies. Closing it also takes it out of
    /// the epoll set (libcurl never duplicates its sockets).
    fileprivate func closeSocket(_ socket: Int32) -> Int32 {
        if sockets[socket].owner == .webSocket { webSocketsBySocket[socket] = nil }
        sockets[socket] = SocketTable.Entry()
        return close(socket)
    }

    fileprivate func setTimer(milliseconds: Int) {
        // Clamped: libcurl's timeouts are (see `Duration.longestCurlTimeout`), but a wait is
        // never worth an overflow trap on this thread.
        guard milliseconds >= 0 else {
            timerDeadline = nil
            return
        }
        let wait = UInt64(min(milliseconds, Int(Int32.max)))
        timerDeadline = courier_monotonic_nanoseconds() + wait * 1_000_000
    }
}

/// CURLMOPT_SOCKETFUNCTION: libcurl says which events it wants on a socket.
private let engineSocketCallback: curl_socket_callback = { easy, socket, what, userdata, _ in
    let engine = Unmanaged<CurlEngine>.fromOpaque(userdata!).takeUnretainedValue()
    engine.watch(socket: socket, what: what, easy: easy)
    return 0
}

/// CURLOPT_OPENSOCKETFUNCTION (set on every easy handle with the engine as its data): a
/// connection opened as the session's socket options say.
let engineOpenSocketCallback: curl_opensocket_callback = { userdata, _, address in
    let engine = Unmanaged<CurlEngine>.fromOpaque(userdata!).takeUnretainedValue()
    return engine.openSocket(address!, engine.limits.socket)
}

/// CURLOPT_OPENSOCKETFUNCTION of a transfer whose socket options are its own or ask for
/// something only the opening can do (MPTCP, the user timeout), with the transfer as its data
/// (set for every hop, so it never names an earlier transfer).
let transferOpenSocketCallback: curl_opensocket_callback = { userdata, _, address in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.engine.openSocket(address!, transfer.current.sharedOptions.value.socket)
}

/// CURLOPT_CLOSESOCKETFUNCTION (set on every easy handle with the engine as its data).
let engineCloseSocketCallback: curl_closesocket_callback = { userdata, socket in
    let engine = Unmanaged<CurlEngine>.fromOpaque(userdata!).takeUnretainedValue()
    return engine.closeSocket(socket)
}

/// CURLMOPT_TIMERFUNCTION: libcurl asks to be called after `timeout` ms (-1: no timer).
private let engineTimerCallback: curl_multi_timer_callback = { _, timeout, userdata in
    let engine = Unmanaged<CurlEngine>.fromOpaque(userdata!).takeUnretainedValue()
    engine.setTimer(milliseconds: timeout)
    return 0
}
