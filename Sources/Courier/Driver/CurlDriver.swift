import CCurlShim
import Foundation
import HTTPTypes
import Synchronization

/// Runs one curl multi handle on a thread of its own.
///
/// Threading: the driver thread (`courier.driver`) makes every libcurl call for the multi
/// handle and its easy handles. Other threads talk to it only through `submit(_:)`, which
/// appends to the `inbox` (a `Mutex`) and signals an eventfd that sits in the same epoll set as
/// libcurl's sockets; the signal is skipped when one is already pending, so a burst of
/// submissions costs one wakeup. The loop drives libcurl with `curl_multi_socket_action`
/// (libcurl tells us which sockets to watch through CURLMOPT_SOCKETFUNCTION and when to time
/// out through CURLMOPT_TIMERFUNCTION), so each wakeup touches only the transfers with work.
///
/// `@unchecked Sendable`: `inbox` is guarded by its mutex; every other `var` is touched only on
/// the driver thread; `wakeFD` and `epollFD` are immutable after `init`.
final class CurlDriver: @unchecked Sendable {
    enum Command {
        case add(Transfer)
        case remove(Transfer)
        case pause(Transfer)
        case unpause(Transfer)
    }

    private struct Inbox {
        var commands: [Command] = []
        var signalled = false
        var shuttingDown = false
    }

    struct Limits: Sendable {
        var maximumConnectionsPerHost = 6
        var maximumTotalConnections = 0
    }

    private let inbox = Mutex(Inbox())
    private let epollFD: Int32
    private let wakeFD: Int32
    private let limits: Limits

    // Driver thread only.
    private var multi: UnsafeMutableRawPointer?
    private var timerDeadline: UInt64?
    private var active: [ObjectIdentifier: Transfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private static let idleHandleLimit = 128

    init(limits: Limits, name: String = "courier.driver") {
        _ = CurlRuntime.initialized
        self.limits = limits
        epollFD = courier_epoll_create()
        precondition(epollFD >= 0, "epoll_create1 failed: errno \(errno)")
        wakeFD = courier_wakeup_create(epollFD)
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Queues a command for the driver thread. Returns false once the driver is shutting down.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        let signal = inbox.withLock { inbox -> Bool? in
            guard !inbox.shuttingDown else { return nil }
            inbox.commands.append(command)
            defer { inbox.signalled = true }
            return !inbox.signalled
        }
        guard let signal else { return false }
        if signal { courier_wakeup_signal(wakeFD) }
        return true
    }

    /// Asks the driver to cancel every transfer, clean up libcurl and end its thread. Returns
    /// at once; the thread keeps `self` alive until `curl_multi_cleanup` has returned.
    func shutdown() {
        let signal = inbox.withLock { inbox -> Bool in
            guard !inbox.shuttingDown else { return false }
            inbox.shuttingDown = true
            return true
        }
        if signal { courier_wakeup_signal(wakeFD) }
    }

    // MARK: - The loop (driver thread)

    private func run() {
        setUpMulti()
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
            for index in 0..<Int(count) {
                let event = events[index]
                if event.fd == wakeFD {
                    courier_wakeup_drain(wakeFD)
                    stop = processInbox()
                } else {
                    curl_multi_socket_action(multi, event.fd, Int32(event.events), &running)
                }
            }
            if let deadline = timerDeadline, courier_monotonic_nanoseconds() >= deadline {
                // Clear first: socket_action may set a new timer through the timer callback.
                timerDeadline = nil
                curl_multi_socket_action(multi, courier_socket_timeout, 0, &running)
            }
            readCompletions()
        }
        tearDown()
    }

    private func setUpMulti() {
        let multi = curl_multi_init()!
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        courier_multi_setopt_socket_function(multi, driverSocketCallback)
        courier_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        courier_multi_setopt_timer_function(multi, driverTimerCallback)
        courier_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        courier_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, limits.maximumConnectionsPerHost)
        courier_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, limits.maximumTotalConnections)
    }

    /// Milliseconds until libcurl's timer, rounded up; -1 when there is none.
    private func pollTimeout() -> Int32 {
        guard let deadline = timerDeadline else { return -1 }
        let now = courier_monotonic_nanoseconds()
        guard deadline > now else { return 0 }
        return Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
    }

    /// Runs the queued commands. Returns true when the driver should stop.
    private func processInbox() -> Bool {
        let (commands, shuttingDown) = inbox.withLock { inbox in
            defer {
                inbox.commands.removeAll(keepingCapacity: true)
                inbox.signalled = false
            }
            return (inbox.commands, inbox.shuttingDown)
        }
        for command in commands {
            switch command {
            case .add(let transfer): add(transfer)
            case .remove(let transfer): detach(transfer)
            case .pause(let transfer):
                if let easy = transfer.easy { curl_easy_pause(easy, CURLPAUSE_ALL) }
            case .unpause(let transfer):
                if let easy = transfer.easy { curl_easy_pause(easy, CURLPAUSE_CONT) }
            }
        }
        return shuttingDown
    }

    private func add(_ transfer: Transfer) {
        guard transfer.driverWillAdd() == .add else { return }
        let easy = idleHandles.popLast() ?? curl_easy_init()!
        transfer.easy = easy
        transfer.beginHop()
        active[ObjectIdentifier(transfer)] = transfer
        do {
            try transfer.configure(easy)
        } catch {
            detach(transfer)
            transfer.complete(with: .failure(error))
            return
        }
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            detach(transfer)
            let message = String(cString: curl_multi_strerror(code))
            transfer.complete(
                with: .failure(CourierError.transport(.init(url: transfer.current.url, message: message))))
        }
    }

    /// Takes the transfer's easy handle off the multi handle and keeps it for reuse.
    private func detach(_ transfer: Transfer) {
        guard let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, easy)
        transfer.releaseConfiguration()
        transfer.easy = nil
        active.removeValue(forKey: ObjectIdentifier(transfer))
        if idleHandles.count < Self.idleHandleLimit {
            curl_easy_reset(easy)
            idleHandles.append(easy)
        } else {
            curl_easy_cleanup(easy)
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
            let transfer = Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
            finish(transfer, easy: easy, code: code)
        }
    }

    private func finish(_ transfer: Transfer, easy: UnsafeMutableRawPointer, code: CURLcode) {
        if transfer.isFinished {
            detach(transfer)  // cancelled meanwhile; the caller already has its answer
            return
        }
        let result = TransferOutcome.evaluate(transfer, easy: easy, code: code)
        switch result {
        case .redirect(let next):
            transfer.earlierHopsDuration += TransferOutcome.totalTime(easy)
            curl_multi_remove_handle(multi, easy)
            transfer.releaseConfiguration()
            curl_easy_reset(easy)
            transfer.current = next
            transfer.redirectCount += 1
            transfer.beginHop()
            do {
                try transfer.configure(easy)
            } catch {
                detach(transfer)
                transfer.complete(with: .failure(error))
                return
            }
            curl_multi_add_handle(multi, easy)
        case .done(let result):
            detach(transfer)
            transfer.complete(with: result)
        }
    }

    private func tearDown() {
        for transfer in Array(active.values) {
            transfer.cancel()
            detach(transfer)
        }
        // Commands that arrived after the last inbox pass: fail their transfers.
        let leftovers = inbox.withLock { inbox in
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        for case .add(let transfer) in leftovers { transfer.cancel() }
        for easy in idleHandles { curl_easy_cleanup(easy) }
        idleHandles.removeAll()
        // Socket callbacks can still fire in here; `self` is alive (this thread holds it).
        curl_multi_cleanup(multi)
        multi = nil
        close(wakeFD)
        close(epollFD)
    }

    // MARK: - libcurl multi callbacks (driver thread)

    fileprivate func watch(socket: Int32, what: Int32) {
        if what == CURL_POLL_REMOVE {
            courier_epoll_unwatch(epollFD, socket)
        } else {
            courier_epoll_watch(epollFD, socket, what)
        }
    }

    fileprivate func setTimer(milliseconds: Int) {
        timerDeadline = milliseconds < 0 ? nil : courier_monotonic_nanoseconds() + UInt64(milliseconds) * 1_000_000
    }
}

/// CURLMOPT_SOCKETFUNCTION: libcurl says which events it wants on a socket.
private let driverSocketCallback: curl_socket_callback = { _, socket, what, userdata, _ in
    let driver = Unmanaged<CurlDriver>.fromOpaque(userdata!).takeUnretainedValue()
    driver.watch(socket: socket, what: what)
    return 0
}

/// CURLMOPT_TIMERFUNCTION: libcurl asks to be called after `timeout` ms (-1: no timer).
private let driverTimerCallback: curl_multi_timer_callback = { _, timeout, userdata in
    let driver = Unmanaged<CurlDriver>.fromOpaque(userdata!).takeUnretainedValue()
    driver.setTimer(milliseconds: timeout)
    return 0
}
