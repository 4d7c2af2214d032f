/// The global actor that `HTTPSessionManager` and its subclasses are isolated to.
///
/// Isolation to a global actor is what lets the manager be an `open class` that apps subclass
/// with mutable state of their own, checked by the compiler, without `@unchecked Sendable`.
/// Only short bookkeeping runs here (the `adapt(_:)` and `process(_:)` hooks and subclass
/// state); encoding, transfers and decoding run in nonisolated code.
@globalActor
public actor HTTPSessionActor {
    /// The shared instance.
    public static let shared = HTTPSessionActor()
}
