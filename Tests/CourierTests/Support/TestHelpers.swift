import Courier
import Foundation
import Testing

/// A manager on httpbin with an ephemeral configuration, so tests write nothing to disk.
func httpbinManager(
    _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
) async throws -> HTTPSessionManager {
    var configuration = HTTPSessionConfiguration.ephemeral
    configure(&configuration)
    return HTTPSessionManager(baseURL: try await TestServers.httpbin(), configuration: configuration)
}

/// A manager on the fault server.
func faultManager(
    _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
) async throws -> HTTPSessionManager {
    var configuration = HTTPSessionConfiguration.ephemeral
    configure(&configuration)
    return HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: configuration)
}

/// Whether `error` is the `CourierError` case `matching` picks out.
func isCourierError(_ error: (any Error)?, _ matching: (CourierError) -> Bool) -> Bool {
    guard let error = error as? CourierError else { return false }
    return matching(error)
}

/// Runs `body` and returns the error it threw, or records an issue if it did not throw.
func capturedError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> (any Error)? {
    do {
        try await body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// The deterministic bytes the fault server serves: byte i is i % 251.
func faultBytes(_ count: Int, from start: Int = 0) -> Data {
    Data((start..<(start + count)).map { UInt8($0 % 251) })
}

/// Reads `iterator` to its end, checking each chunk's first and last byte against
/// `faultBytes`'s pattern from `offset` on: the offset reached, and whether every chunk was in
/// its place.
func readPatternToEnd<Chunks: AsyncIteratorProtocol>(
    _ iterator: inout Chunks, from offset: Int
) async throws -> (offset: Int, matches: Bool) where Chunks.Element == Data {
    var offset = offset
    var matches = true
    while let chunk = try await iterator.next() {
        if chunk.first != UInt8(offset % 251) || chunk.last != UInt8((offset + chunk.count - 1) % 251) {
            matches = false
        }
        offset += chunk.count
    }
    return (offset, matches)
}

extension ContinuousClock.Instant.Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Array where Element: Sendable {
    /// The elements as an `AsyncSequence` (an upload's stream body, say), then its end.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}
