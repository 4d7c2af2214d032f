import Foundation
import HTTPTypes
import Testing

@_spi(CourierInternals) @testable import CourierCore
@testable import CourierEngine
@testable import CourierTransport

/// The engine's state is confined to its thread, and debug builds check it: touching it from
/// elsewhere stops the process (in a child process here, as an exit test).
@Suite struct ThreadConfinementTests {
    static func transfer(on engine: CurlEngine) -> Transfer {
        let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:1", path: "/")
        return Transfer(
            request: TransferRequest(
                head: head, urlString: "http://127.0.0.1:1/", body: nil, options: TransferOptions()),
            engine: engine)
    }

    @Test func aTransfersStateReadOffTheEngineThreadStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let transfer = ThreadConfinementTests.transfer(on: CurlEngine(limits: .init()))
            _ = transfer.receivedBytes
        }
    }

    @Test func completingATransferOffTheEngineThreadStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let transfer = ThreadConfinementTests.transfer(on: CurlEngine(limits: .init()))
            transfer.complete(with: .failure(CancellationError()))
        }
    }

    @Test func onTheEngineThreadTheSameReadIsFine() async {
        let engine = CurlEngine(limits: .init())
        defer { engine.shutdown() }
        let transfer = Self.transfer(on: engine)
        let read = await withCheckedContinuation { continuation in
            let submitted = engine.submit(
                .run { _ in continuation.resume(returning: (EngineThread.isCurrent, transfer.receivedBytes)) })
            if !submitted { continuation.resume(returning: (false, -1)) }
        }
        #expect(read.0 == true)
        #expect(read.1 == 0)
        #expect(!EngineThread.isCurrent)
    }
}
