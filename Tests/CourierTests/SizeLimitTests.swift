import Courier
import Foundation
import Testing

/// Limits on what a response may grow to, whatever it goes to: a request's
/// `maximumResponseSize` for a body in memory, a byte stream and a download, and the
/// decompression ratio (`maximumDecompressionRatio`) against the fault server's gzip bombs
/// (`/bomb?mb=N`: N MiB of zeros, about a thousand to one).
@Suite struct SizeLimitTests {
    private func isTooLarge(_ error: (any Error)?) -> Bool {
        guard case .responseTooLarge = error as? CourierError else { return false }
        return true
    }

    private func ratioOf(_ ratio: Int) -> RequestOptions {
        var options = RequestOptions()
        options.maximumDecompressionRatio = ratio
        return options
    }

    private func sizeOf(_ size: Int64) -> RequestOptions {
        var options = RequestOptions()
        options.maximumResponseSize = size
        return options
    }

    @Test func aBombPastTheRatioEndsAByteStream() async throws {
        let api = try await faultManager { $0.maximumDecompressionRatio = 100 }
        for path in ["bomb", "bomb-chunked"] {
            var received = 0
            let error = await capturedError {
                for try await chunk in api.bytes(.get, path, parameters: ["mb": 64]) { received += chunk.count }
            }
            #expect(isTooLarge(error), "\(path): \(String(describing: error))")
            #expect((error as? CourierError)?.context.message.contains("100 times") == true)
            // Stopped early: nowhere near the 64 MiB it would decode to.
            #expect(received < 8 << 20)
        }
    }

    @Test func aBombPastTheRatioEndsADownloadAndNoFileAppears() async throws {
        let api = try await faultManager()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("bomb.bin")
        let error = await capturedError {
            _ = try await api.downloadTask(
                "bomb", parameters: ["mb": 64], requestOptions: ratioOf(50), to: destination
            ).response
        }
        #expect(isTooLarge(error), "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func aBodyWithinTheRatioArrivesWhole() async throws {
        // Zeros compress about a thousand to one: under a ratio of 5,000 the whole 8 MiB comes.
        let api = try await faultManager()
        var received = 0
        for try await chunk in api.bytes(.get, "bomb", parameters: ["mb": 8], options: ratioOf(5_000)) {
            received += chunk.count
        }
        #expect(received == 8 << 20)
    }

    @Test func aRequestsSizeLimitEndsAByteStream() async throws {
        let api = try await faultManager()
        // Chunked, so no length says so first: it fails as the bytes pass the limit.
        var received = 0
        let error = await capturedError {
            for try await chunk in api.bytes(
                .get, "chunked", parameters: ["n": 1_000_000, "chunk": 10_000], options: sizeOf(100_000))
            {
                received += chunk.count
            }
        }
        #expect(isTooLarge(error), "\(String(describing: error))")
        #expect(received <= 100_000)
    }

    @Test func aRequestsSizeLimitRefusesADownloadByItsLength() async throws {
        let api = try await faultManager()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("big.bin")
        let error = await capturedError {
            _ = try await api.downloadTask(
                "bytes", parameters: ["n": 1_000_000], requestOptions: sizeOf(100_000), to: destination
            ).response
        }
        #expect(isTooLarge(error), "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        // Within the limit, the same download arrives.
        let response = try await api.downloadTask(
            "bytes", parameters: ["n": 100_000], requestOptions: sizeOf(100_000), to: destination
        ).response
        #expect(try Data(contentsOf: response.fileURL) == faultBytes(100_000))
    }

    @Test func aRequestsSizeLimitWinsOverTheSessionsForABodyInMemory() async throws {
        let api = try await faultManager { $0.maximumResponseSize = 1 << 20 }
        let error = await capturedError {
            _ = try await api.GET(
                "bytes", parameters: ["n": 5_000], options: sizeOf(1_000), serializer: DataResponseSerializer())
        }
        #expect(isTooLarge(error))
        // A larger one of its own lets through what the session's would refuse.
        let big = try await api.GET(
            "bytes", parameters: ["n": 2_097_152], options: sizeOf(4 << 20), serializer: DataResponseSerializer())
        #expect(big.count == 2 << 20)
    }
}
