import CCurlShim
import CourierCore
import Foundation

/// A multi handle that connects WebSockets, on its engine's thread and epoll set.
///
/// Not the engine's own multi handle: libcurl 7.88 has no WebSocket support, so a WebSocket
/// is a `CURLOPT_CONNECT_ONLY` transfer (DNS, proxy tunnel, TLS with the session's trust,
/// pins and client certificate), after which Courier speaks the protocol over the connection
/// with `curl_easy_send` and `curl_easy_recv`. Such a connection stays in its multi handle's
/// connection cache for as long as it is open, and there it would count against the
/// session's connections per host (six open WebSockets would hold every request to their
/// host) and could be closed as the oldest idle connection. These multi handles have no
/// limits and carry nothing else. Each takes at most `capacity` connections: libcurl finds a
/// connection-only transfer's connection by a walk over its multi handle's cache on every
/// send and receive, so the walk stays short however many WebSockets are open.
final class WebSocketMulti: EngineDeadline {
    /// Connections on one multi handle at most.
    static let capacity = 32

    unowned let engine: CurlEngine
    let handle: UnsafeMutableRawPointer
    /// Its place in the engine's `webSocketMultis`, which its sockets' entries name.
    let slot: Int32
    /// WebSockets on it, connecting or open.
    var connections = 0
    var deadline: UInt64?

    init(engine: CurlEngine, slot: Int32) {
        self.engine = engine
        self.slot = slot
        handle = CurlRuntime.handle(curl_multi_init)!
        let me = Unmanaged.passUnretained(self).toOpaque()
        courier_multi_setopt_socket_function(handle, webSocketMultiSocketCallback)
        courier_multi_setopt_pointer(handle, CURLMOPT_SOCKETDATA, me)
        courier_multi_setopt_timer_function(handle, webSocketMultiTimerCallback)
        courier_multi_setopt_pointer(handle, CURLMOPT_TIMERDATA, me)
        courier_multi_setopt_long(handle, CURLMOPT_MAXCONNECTS, Self.capacity * 2)
    }

    /// Frees the multi handle, once every easy handle has left it.
    func cleanUp() {
        curl_multi_cleanup(handle)
    }

    /// libcurl has events for `socket`, one of this handle's.
    func socketAction(_ socket: Int32, events: Int32) {
        var running: Int32 = 0
        curl_multi_socket_action(handle, socket, events, &running)
        readCompletions()
    }

    func deadlinePassed(now: UInt64) {
        deadline = nil
        var running: Int32 = 0
        curl_multi_socket_action(handle, courier_socket_timeout, 0, &running)
        readCompletions()
    }

    /// Hands each finished connect to its WebSocket.
    private func readCompletions() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(handle, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            var pointer: UnsafeMutableRawPointer?
            courier_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer else { continue }
            Unmanaged<WebSocketConnection>.fromOpaque(pointer).takeUnretainedValue()
                .connected(message.pointee.data.result)
        }
    }

    /// CURLMOPT_SOCKETFUNCTION: the interest libcurl has in a socket while it connects. A
    /// socket a connected WebSocket has taken over is the WebSocket's.
    fileprivate func watch(socket: Int32, what: Int32) {
        var entry = engine.sockets[socket]
        guard entry.owner != .webSocket else { return }
        if what == CURL_POLL_REMOVE {
            if entry.interest != nil { courier_epoll_unwatch(engine.epollFD, socket) }
            entry.interest = nil
            engine.sockets[socket] = entry
            return
        }
        let previous = entry.interest
        entry.interest = what
        entry.owner = .webSocketMulti
        entry.slot = slot
        engine.sockets[socket] = entry
        guard previous != what else { return }
        let add: Int32 = previous == nil ? 1 : 0
        if courier_epoll_set(engine.epollFD, socket, what, add) != 0 {
            courier_epoll_set(engine.epollFD, socket, what, 1 - add)
        }
    }

    fileprivate func setTimer(milliseconds: Int) {
        guard milliseconds >= 0 else {
            deadline = nil
            return
        }
        let due = courier_monotonic_nanoseconds() + UInt64(min(milliseconds, Int(Int32.max))) * 1_000_000
        deadline = due
        engine.deadlines.schedule(self, at: due)
    }
}

private let webSocketMultiSocketCallback: curl_socket_callback = { _, socket, what, userdata, _ in
    Unmanaged<WebSocketMulti>.fromOpaque(userdata!).takeUnretainedValue().watch(socket: socket, what: what)
    return 0
}

private let webSocketMultiTimerCallback: curl_multi_timer_callback = { _, timeout, userdata in
    Unmanaged<WebSocketMulti>.fromOpaque(userdata!).takeUnretainedValue().setTimer(milliseconds: timeout)
    return 0
}

extension CurlEngine {
    /// A multi handle with room for one more WebSocket. Engine thread.
    func webSocketMultiWithRoom() -> WebSocketMulti {
        if let multi = webSocketMultis.first(where: { $0.connections < WebSocketMulti.capacity }) { return multi }
        let multi = WebSocketMulti(engine: self, slot: Int32(webSocketMultis.count))
        webSocketMultis.append(multi)
        return multi
    }

    /// An event on a socket that a WebSocket multi handle or a connected WebSocket owns.
    func webSocketSocketReady(_ socket: Int32, events: Int32) {
        let entry = sockets[socket]
        switch entry.owner {
        case .webSocketMulti:
            guard entry.interest != nil else { return }
            webSocketMultis[Int(entry.slot)].socketAction(socket, events: events)
        case .webSocket:
            webSocketsBySocket[socket]?.socketReady(events: events)
        case .transfers:
            break
        }
    }

    /// Ends every WebSocket (the engine is shutting down) and frees the multi handles. After
    /// the last commands have run: a WebSocket started by one of them is ended here too.
    func closeWebSockets() {
        for connection in Array(webSockets.values) {
            connection.finish(
                .failure(
                    CourierError.sessionInvalidated(
                        .init(
                            url: connection.url,
                            message: "The session was invalidated while the WebSocket was open"))))
        }
        for multi in webSocketMultis { multi.cleanUp() }
        webSocketMultis.removeAll()
        deadlines.removeAll()
        webSocketBuffer?.deallocate()
        webSocketBuffer = nil
    }
}
