/// Where a response came from.
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum ResponseSource: Sendable, Hashable {
    /// The network.
    case network
    /// The HTTP cache, without contacting the server.
    case cache
    /// The HTTP cache, after the server confirmed it with a 304.
    case revalidatedCache
}
