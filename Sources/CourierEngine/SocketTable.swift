/// What the engine knows of each socket descriptor: whether it is in the epoll set and with
/// which interest (`CURL_POLL_IN`, `_OUT`, `_INOUT`), whether libcurl has stopped watching it
/// ("parked"), and whether it is a TCP connection's socket that libcurl opened through the
/// engine (the kind that is parked when idle).
/// Engine thread only.
///
/// Indexed by the descriptor itself: descriptors are small numbers that the kernel reuses
/// lowest first, so the table stays as long as the most sockets open at once, and a lookup
/// (two per request, in the loop and in the socket callback) costs no hashing.
struct SocketTable {
    struct Entry: Equatable {
        /// The interest the socket is registered with in the epoll set; nil when it is not.
        var interest: Int32?
        var parked = false
        var isConnection = false
        /// Who the socket's events go to.
        var owner = Owner.transfers
        /// For `.webSocketMulti`: which of the engine's WebSocket multi handles.
        var slot: Int32 = 0
        /// The interest libcurl last asked for (`CURL_POLL_*`; 0 after a removal). It differs
        /// from `interest` while the input is held.
        var requested: Int32 = 0
        /// The transfer on this connection has its receiving paused, and the connection is its
        /// own (HTTP/1): input is not watched, whatever libcurl asks (see `CurlEngine.holdInput`).
        var heldInput = false
        /// The easy handle whose transfer last asked libcurl to watch the socket.
        var easy: UnsafeMutableRawPointer?
        /// When the connection's socket was opened (`courier_monotonic_nanoseconds`).
        var opened: UInt64 = 0
        /// Transfers that ended on the connection, counted when the session limits its
        /// connections (`CurlEngine.retireIfSpent`).
        var transfers = 0
    }

    /// Who handles a socket's events.
    enum Owner: UInt8 {
        /// The engine's multi handle (its transfers).
        case transfers
        /// One of the multi handles that connect WebSockets (`WebSocketMulti`).
        case webSocketMulti
        /// A connected WebSocket, which reads and writes the socket itself.
        case webSocket
    }

    private var entries: [Entry] = []

    subscript(socket: Int32) -> Entry {
        get { socket >= 0 && Int(socket) < entries.count ? entries[Int(socket)] : Entry() }
        set {
            guard socket >= 0 else { return }
            let index = Int(socket)
            if index >= entries.count {
                guard newValue != Entry() else { return }
                entries.append(contentsOf: repeatElement(Entry(), count: index + 1 - entries.count))
            }
            entries[index] = newValue
        }
    }
}
