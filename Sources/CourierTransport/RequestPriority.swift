/// How urgent a request is, as URLSession's task priority and ASIHTTPRequest's queue priority:
/// when the session's `maximumConcurrentTasks` holds requests back, higher ones start first
/// (in arrival order within one priority); over HTTP/2 it is the stream's weight (low 4,
/// normal 16, libcurl's and the protocol's default, high 128), which the server may use to
/// share the connection.
public enum RequestPriority: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// After normal and high requests.
    case low = 0
    /// The default.
    case normal = 1
    /// Before normal and low requests.
    case high = 2

    /// Lower first.
    public static func < (lhs: RequestPriority, rhs: RequestPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The HTTP/2 stream weight (`CURLOPT_STREAM_WEIGHT`, 1 to 256).
    package var streamWeight: Int {
        switch self {
        case .low: 4
        case .normal: 16
        case .high: 128
        }
    }
}
