import CCurlShim
import Foundation
import Testing

@testable import Courier
@_spi(CourierInternals) @testable import CourierCore
@testable import CourierEngine
@testable import CourierPipeline
@testable import CourierSerialization
@testable import CourierStorage
@testable import CourierTransport

/// Large copies avoid the distances between source and destination at which they are slow
/// (`courier_copy_distance`), without changing a byte of what is copied.
@Suite struct CopyPlacementTests {
    /// A byte pattern with no period near the page size, so a misplaced byte shows.
    static let pattern: [UInt8] = (0..<80_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
    static let guardBytes = [UInt8](repeating: 0xEE, count: 8192)

    /// Distances either side of the slow range, and counts either side of the piece size.
    @Test(arguments: [0, 1, 15, 16, 17, 31, 32, 63, 64, 65, 2048, 4080, 4095])
    func copiesAreExactAtEveryDistance(distance: Int) {
        let page = 4096
        for count in [0, 1, 2047, 2048, 2049, 5000, 70_001] {
            let source = UnsafeMutableRawBufferPointer.allocate(byteCount: count + page, alignment: page)
            let destination = UnsafeMutableRawBufferPointer.allocate(byteCount: count + 2 * page, alignment: page)
            defer {
                source.deallocate()
                destination.deallocate()
            }
            Self.pattern.withUnsafeBytes { _ = memcpy(source.baseAddress!, $0.baseAddress!, count) }
            memset(destination.baseAddress!, 0xEE, destination.count)
            let target = destination.baseAddress! + distance
            #expect(courier_copy_distance(target, source.baseAddress!) == distance)

            courier_copy_bytes(target, source.baseAddress!, count)

            #expect(memcmp(target, source.baseAddress!, count) == 0, "count \(count)")
            let after = destination.count - distance - count
            #expect(memcmp(destination.baseAddress!, Self.guardBytes, distance) == 0, "bytes before, count \(count)")
            #expect(memcmp(target + count, Self.guardBytes, after) == 0, "bytes after, count \(count)")
        }
    }

    /// libcurl hands the read callback the same buffer every time. A file segment whose bytes
    /// would land at a slow distance from their page-cache position gets one short read, and
    /// every read after it is at distance 0 and full; the bytes sent are the same.
    @Test(arguments: [(prefix: 16, bufferOffset: 0), (prefix: 0, bufferOffset: 16), (prefix: 40, bufferOffset: 4080)])
    func fileReadsArePlacedOnceAndSendTheSameBytes(prefix: Int, bufferOffset: Int) throws {
        var fileBytes = Data()
        while fileBytes.count < 1 << 20 { fileBytes.append(contentsOf: Self.pattern[..<4099]) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("placement-\(UUID().uuidString)")
        try fileBytes.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let head = Data(repeating: 0x2D, count: prefix)
        let reader = SegmentBodyReader([
            .data(head), .file(path: file.path, offset: 0, length: Int64(fileBytes.count)), .data(Data("end".utf8)),
        ])
        defer { reader.close() }

        let size = 256 << 10
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: size + 4096, alignment: 4096)
        defer { storage.deallocate() }
        let buffer = UnsafeMutableRawBufferPointer(rebasing: storage[bufferOffset..<(bufferOffset + size)])

        var sent = Data()
        var counts: [Int] = []
        while true {
            guard case .bytes(let count) = reader.read(into: buffer) else {
                Issue.record("the reader did not return bytes")
                return
            }
            if count == 0 { break }
            counts.append(count)
            sent.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }

        #expect(sent == head + fileBytes + Data("end".utf8))
        // The first read stops where the next one starts at distance 0 from the buffer's start.
        let firstFileBytes = counts[0] - prefix
        #expect(firstFileBytes < 4096)
        #expect((Int(bitPattern: buffer.baseAddress) - firstFileBytes) & 4095 == 0)
        // Then full reads until the last.
        #expect(counts.dropFirst().dropLast().allSatisfy { $0 == size }, "\(counts)")
    }

    /// A file segment already at a fast distance is read as before: full reads from the start.
    @Test func fileReadsAtAFastDistanceAreNotShortened() throws {
        let fileBytes = Data(repeating: 0x5A, count: 600_000)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("placement-\(UUID().uuidString)")
        try fileBytes.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let reader = SegmentBodyReader([.file(path: file.path, offset: 0, length: Int64(fileBytes.count))])
        defer { reader.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 4096)
        defer { buffer.deallocate() }

        guard case .bytes(let count) = reader.read(into: buffer) else {
            Issue.record("the reader did not return bytes")
            return
        }
        #expect(count == 256 << 10)
    }

    /// libcurl's large blocks (its receive and send buffers) start on a page boundary, also
    /// after `realloc` moves them, and keep their contents; small blocks are the C library's.
    @Test func libcurlsLargeBlocksArePageAligned() throws {
        let large = Int(courier_page_aligned_minimum)
        func isPageAligned(_ pointer: UnsafeMutableRawPointer?) -> Bool { Int(bitPattern: pointer) & 4095 == 0 }

        let block = try #require(courier_curl_malloc(256 << 10))
        #expect(isPageAligned(block))
        courier_curl_free(block)

        let zeroed = try #require(courier_curl_calloc(4, large))
        #expect(isPageAligned(zeroed))
        #expect(UnsafeRawBufferPointer(start: zeroed, count: 4 * large).allSatisfy { $0 == 0 })
        courier_curl_free(zeroed)
        #expect(courier_curl_calloc(Int.max, 4) == nil)  // count * size overflows

        // Grown from a small block into a large one, then grown again: aligned, contents kept.
        var grown = try #require(courier_curl_malloc(1000))
        for index in 0..<1000 {
            grown.storeBytes(of: UInt8(truncatingIfNeeded: index), toByteOffset: index, as: UInt8.self)
        }
        for size in [large, 300 << 10, 1 << 20] {
            grown = try #require(courier_curl_realloc(grown, size))
            #expect(isPageAligned(grown), "size \(size)")
            #expect(
                (0..<1000).allSatisfy {
                    grown.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0)
                })
        }
        // Shrunk to a small block: contents kept.
        grown = try #require(courier_curl_realloc(grown, 500))
        #expect(
            (0..<500).allSatisfy { grown.load(fromByteOffset: $0, as: UInt8.self) == UInt8(truncatingIfNeeded: $0) })
        courier_curl_free(grown)
    }
}
