import Foundation
import Testing

@testable import Courier

/// A download continued with `Range` (by a retry policy, by resume data, by the CLI's
/// `--continue`) against a server that answers the range wrongly: a `206` of another version,
/// one whose body runs past its `Content-Range`, one that stops short. None of them may end in
/// a file that never existed; the bytes already on disk stay for another try.
@Suite struct ResumeValidationTests {
    static let total = 1000

    /// A download of `/file/<name>` cut after 400 bytes, whose `Range` requests are answered
    /// as `answer` says (`changed`, `overrun`, `short-K`).
    static func cutDownload(_ name: String, _ answer: String) -> JSON {
        ["n": .int(total), "drop-after": 400, "range-answer": .string(answer)]
    }

    /// The download fails with the error `matches` accepts, leaves no destination and no other
    /// file, and its resume data holds `kept` bytes, the fault server's first `kept`.
    static func expectRefused(
        _ api: HTTPSessionManager, _ name: String, _ answer: String, kept: Int,
        retry: RetryPolicy? = nil, sourceLocation: SourceLocation = #_sourceLocation,
        _ matches: (CourierError) -> Bool
    ) async throws -> ResumeData? {
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let error = await capturedError {
            _ = try await api.downloadTask(
                "file/\(name)", parameters: cutDownload(name, answer),
                requestOptions: RequestOptions(retryPolicy: retry),
                to: destination
            ).value
        }
        let matched = isCourierError(error, matches)
        #expect(matched, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: destination.path), sourceLocation: sourceLocation)
        let resumeData = (error as? CourierError)?.context.resumeData
        #expect(resumeData?.bytesWritten == Int64(kept), sourceLocation: sourceLocation)
        if let partial = resumeData?.partialFile {
            #expect(try Data(contentsOf: partial) == faultBytes(kept), sourceLocation: sourceLocation)
        }
        #expect(
            try DownloadTests.contents(directory).count == (resumeData == nil ? 0 : 1), sourceLocation: sourceLocation)
        return resumeData
    }

    static let retryOnce = RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(1), deadline: nil)

    @Test func a206ForAnotherVersionIsNotSplicedIn() async throws {
        let api = try await faultManager()
        let name = DownloadTests.uniqueName("changed-206")
        let resumeData = try await Self.expectRefused(api, name, "changed", kept: 400, retry: Self.retryOnce) {
            if case .invalidResponse(let context) = $0 { context.message.contains("another version") } else { false }
        }
        #expect(resumeData?.validator == "\"\(name)-1000\"")
        #expect(try await DownloadTests.stats(api, name)["ranges"] == [nil, "bytes=400-"])
        // Resume data meets the same check: the partial file stays as it was.
        let data = try #require(resumeData)
        let destination = data.partialFile.deletingLastPathComponent().appendingPathComponent("file.bin")
        let error = await capturedError { _ = try await api.downloadTask(resumingFrom: data, to: destination).value }
        #expect(isCourierError(error) { if case .invalidResponse = $0 { true } else { false } })
        #expect(try Data(contentsOf: data.partialFile) == faultBytes(400))
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func a206WhoseBodyRunsPastItsRangeKeepsOnlyTheBytesBefore() async throws {
        let api = try await faultManager()
        let name = DownloadTests.uniqueName("overrun-206")
        _ = try await Self.expectRefused(api, name, "overrun", kept: 400, retry: Self.retryOnce) {
            if case .invalidResponse(let context) = $0 {
                context.message.contains("more than the range")
            } else {
                false
            }
        }
    }

    @Test func a206ThatStopsShortIsNotAWholeFile() async throws {
        let api = try await faultManager()
        let name = DownloadTests.uniqueName("short-206")
        // The retry gets 100 of the 600 bytes the range announced, then a clean close.
        let resumeData = try await Self.expectRefused(api, name, "short-100", kept: 500, retry: Self.retryOnce) {
            if case .connectionLost(let context) = $0 { context.message.contains("byte 500 of 1000") } else { false }
        }
        // Each resumption adds what arrived, until the file is whole.
        var data = try #require(resumeData)
        let destination = data.partialFile.deletingLastPathComponent().appendingPathComponent("file.bin")
        for kept in stride(from: 600, through: 900, by: 100) {
            let error = await capturedError {
                _ = try await api.downloadTask(resumingFrom: data, to: destination).value
            }
            data = try #require((error as? CourierError)?.context.resumeData)
            #expect(data.bytesWritten == Int64(kept))
        }
        let file = try await api.downloadTask(resumingFrom: data, to: destination).value
        #expect(try Data(contentsOf: file) == faultBytes(Self.total))
    }

    @Test func aResumedDownloadsProgressStartsAtTheBytesOnDisk() async throws {
        let api = try await faultManager()
        let name = DownloadTests.uniqueName("resumed-progress")
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let error = await capturedError {
            _ = try await api.downloadTask(
                "file/\(name)", parameters: ["n": 102_400, "drop-after": 10_240], to: destination
            ).value
        }
        let resumeData = try #require((error as? CourierError)?.context.resumeData)
        #expect(resumeData.bytesWritten == 10_240)
        #expect(resumeData.totalBytes == 102_400)
        let task = api.downloadTask(resumingFrom: resumeData, to: destination)
        var seen: [TransferProgress] = []
        for await progress in task.downloadProgress { seen.append(progress) }
        _ = try await task.value
        #expect(seen.first?.completedBytes ?? 0 >= 10_240)
        #expect(seen.allSatisfy { $0.totalBytes == 102_400 }, "\(seen)")
        #expect(seen.last?.completedBytes == 102_400)
        let completed = seen.map(\.completedBytes)
        #expect(completed == completed.sorted())
    }
}
