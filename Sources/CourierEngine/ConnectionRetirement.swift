import CCurlShim

// A session's connection lifetime (`HTTPSessionConfiguration.maximumConnectionAge`) and
// requests per connection (`maximumRequestsPerConnection`): a connection that has reached
// either carries no further request. libcurl has no per-request count, and its age limit
// (`CURLOPT_MAXLIFETIME_CONN`) arrived in 7.80, so the engine retires such connections itself,
// the same way on every libcurl: the socket is drained and shut down, which libcurl sees as a
// connection the server closed when it next considers it, and it opens a new one.
//
// When: right after the transfer that spent it, if the connection is then idle (HTTP/1.1;
// libcurl has already stopped watching it); otherwise when it falls idle (an HTTP/2
// connection's last stream ends). An idle connection that reaches its age is retired by a
// sweep at that moment, so that a pool kept warm by steady traffic still moves to new
// connections (a new address behind a load balancer, say).

extension CurlEngine.Limits {
    /// Whether connections are retired by age or use.
    var retiresConnections: Bool { maximumConnectionAge != nil || maximumRequestsPerConnection != nil }
}

extension CurlEngine {
    /// Counts the transfer that just ended on its connection; retires the connection when
    /// that spent it (now if it is idle, else when it falls idle). Engine thread.
    func countTransfer(on easy: UnsafeMutableRawPointer) {
        var socket = CURL_SOCKET_BAD
        guard courier_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else {
            return
        }
        var entry = sockets[socket]
        guard entry.isConnection, entry.owner == .transfers else { return }
        entry.transfers += 1
        let spent = isPastAge(entry) || limits.maximumRequestsPerConnection.map { entry.transfers >= $0 } ?? false
        guard spent else {
            sockets[socket] = entry
            return
        }
        if entry.parked {
            sockets[socket] = entry
            retire(socket)
        } else {
            entry.retireWhenIdle = true
            sockets[socket] = entry
        }
    }

    /// Whether the connection is older than the session allows (`now`: the clock, read here
    /// only when there is a limit).
    func isPastAge(_ entry: SocketTable.Entry, now: UInt64? = nil) -> Bool {
        guard let age = limits.maximumConnectionAge, entry.opened > 0 else { return false }
        return (now ?? courier_monotonic_nanoseconds()) >= entry.opened &+ age
    }

    /// Takes an idle connection out of the pool: out of the epoll set, drained and shut down
    /// (libcurl closes it when it next considers it). Engine thread.
    func retire(_ socket: Int32) {
        var entry = sockets[socket]
        if entry.interest != nil { courier_epoll_unwatch(epollFD, socket) }
        entry.interest = nil
        entry.parked = false
        entry.retireWhenIdle = false
        sockets[socket] = entry
        courier_socket_retire(socket)
    }

    /// Makes sure the sweep runs by the time the newly parked `entry` reaches its age.
    func scheduleAgeSweep(for entry: SocketTable.Entry) {
        guard let age = limits.maximumConnectionAge, entry.opened > 0 else { return }
        let due = entry.opened &+ age
        if let scheduled = ageSweep.deadline, scheduled <= due { return }
        ageSweep.deadline = due
        deadlines.schedule(ageSweep, at: due)
    }

    /// Retires the idle connections that have reached their age, and schedules the sweep for
    /// the next one to. Engine thread.
    func sweepAgedConnections(now: UInt64) {
        ageSweep.deadline = nil
        for socket in sockets.sockets(where: { $0.parked && $0.isConnection }) {
            let entry = sockets[socket]
            if isPastAge(entry, now: now) {
                retire(socket)
            } else {
                scheduleAgeSweep(for: entry)
            }
        }
    }
}

/// The engine's timer for idle connections reaching their age (see `sweepAgedConnections`).
final class ConnectionAgeSweep: EngineDeadline {
    /// When the next idle connection reaches its age; nil when none is waiting.
    var deadline: UInt64?
    /// Unowned: the engine owns the sweep.
    unowned let engine: CurlEngine

    init(engine: CurlEngine) {
        self.engine = engine
    }

    func deadlinePassed(now: UInt64) {
        engine.sweepAgedConnections(now: now)
    }
}
