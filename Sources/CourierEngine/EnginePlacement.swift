/// Where a session's requests run when it has several engines, and how the session's
/// connection limits are divided among them so that they keep meaning the whole session's.
///
/// **The rule.** Each origin (scheme, host and port) has a window of engines: `originWidth`
/// of them, starting at one picked by a hash of the origin (its home). A request goes to the
/// least loaded engine of its origin's window (load: transfers submitted and not yet ended),
/// the home engine when loads tie. So a client that sends one request at a time to an API
/// always uses the home engine and its idle connections, a burst spreads over the window, and
/// different origins start at different engines.
///
/// **The limits.** libcurl counts connections per multi handle, so each engine is given a
/// share of the session's: with as many engines as the per-host limit allows (`N ≤ L`), each
/// gets `L / N` (the first `L % N` one more), and every origin may use all of them; with more
/// engines than that (`N > L`), each gets one connection per host and an origin's window is
/// `L` engines wide. Either way an origin has at most `L` connections. The total limit is
/// divided the same way, and a session never has more engines than its total limit. An
/// HTTP/2 origin therefore has one multiplexed connection per engine of its window, not one per
/// burst (`CURLOPT_PIPEWAIT`: an engine waits for its connection's settings rather than open
/// another).
struct EnginePlacement: Sendable {
    /// Engines in the session.
    let engineCount: Int
    /// Engines one origin may use.
    let originWidth: Int

    /// The placement for `engineCount` engines under the per-host limit (0: none).
    init(engineCount: Int, maximumConnectionsPerHost: Int) {
        self.engineCount = max(1, engineCount)
        originWidth =
            maximumConnectionsPerHost > 0 ? min(self.engineCount, maximumConnectionsPerHost) : self.engineCount
    }

    /// The engines a session with `requested` engines runs: at least one, and no more than
    /// the total connection limit allows (0: none), each engine holding at least one.
    static func engineCount(requested: Int, maximumConnections: Int) -> Int {
        let count = max(1, requested)
        return maximumConnections > 0 ? min(count, maximumConnections) : count
    }

    /// The engine for a request to `origin` (its URL up to the path), given each engine's load.
    func engine(for origin: Substring.UTF8View, load: (Int) -> Int) -> Int {
        let home = engineCount == 1 ? 0 : Int(Self.hash(origin) % UInt64(engineCount))
        var best = home
        var bestLoad = load(home)
        var index = home
        for _ in 1..<max(originWidth, 1) {
            index = index + 1 == engineCount ? 0 : index + 1
            let candidate = load(index)
            if candidate < bestLoad {
                best = index
                bestLoad = candidate
            }
        }
        return best
    }

    /// The origin part of a URL's text (`https://host:port`, without the path), as its UTF-8.
    static func origin(of url: String) -> Substring.UTF8View {
        let bytes = url.utf8
        var slashes = 0
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: "/") {
                slashes += 1
                if slashes == 3 { break }
            }
            index = bytes.index(after: index)
        }
        return Substring(url)[url.startIndex..<index].utf8
    }

    /// FNV-1a: stable from run to run (Swift's `Hasher` is seeded per process), so an origin
    /// has the same home engine every time.
    static func hash(_ bytes: Substring.UTF8View) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// `limit` divided among the engines: each engine's share (the first ones take the
    /// remainder), or 0 for every engine when there is no limit. With fewer than one per
    /// engine, each gets 1 (the windows keep an origin within the limit).
    static func shares(of limit: Int, engineCount: Int) -> [Int] {
        guard limit > 0 else { return Array(repeating: 0, count: engineCount) }
        guard limit >= engineCount else { return Array(repeating: 1, count: engineCount) }
        return (0..<engineCount).map { limit / engineCount + ($0 < limit % engineCount ? 1 : 0) }
    }
}
