import CCourierSystem
import CourierCore
import Foundation

extension RequestBody {
    /// A fresh reader positioned at the start. Engine thread.
    package func makeReader() -> BodyReader {
        let reader: BodyReader =
            switch content {
            case .data(let data): DataBodyReader(data)
            case .file(let path, let length): SegmentBodyReader([.file(path: path, offset: 0, length: length)])
            case .stream(let bridge): StreamBodyReader(bridge)
            case .segments(let segments): SegmentBodyReader(segments)
            }
        return compressed ? GzipBodyReader(reader) : reader
    }
}

/// Produces a request body on the engine thread, on demand.
///
/// Readers are made and used on the engine thread only, except `StreamBodyBridge`, which is
/// fed from a Swift task and guarded by its own lock.
package protocol BodyReader: AnyObject {
    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyRead
    /// Back to the start. False when that is impossible (a stream already partly sent).
    func rewind() -> Bool
    /// Called (on any thread) when a reader that answered `.wait` has bytes again.
    var onReadable: (@Sendable () -> Void)? { get set }
    /// Releases descriptors; the reader is not used afterwards.
    func close()
}

extension BodyReader {
    func close() {}
}

/// An in-memory body.
final class DataBodyReader: BodyReader {
    private let data: Data
    private var offset = 0
    var onReadable: (@Sendable () -> Void)?

    init(_ data: Data) {
        self.data = data
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        let count = min(buffer.count, data.count - offset)
        guard count > 0 else { return .bytes(0) }
        data.withUnsafeBytes { bytes in
            courier_copy_bytes(buffer.baseAddress!, bytes.baseAddress! + offset, count)
        }
        offset += count
        return .bytes(count)
    }

    func rewind() -> Bool {
        offset = 0
        return true
    }
}

/// A body made of segments: data, file ranges (read with `pread`, opened on first use) and
/// streams of known length.
final class SegmentBodyReader: BodyReader {
    private let segments: [BodySegment]
    private var index = 0
    private var offsetInSegment: Int64 = 0
    private var descriptors: [String: Int32] = [:]
    private var streamReaders: [Int: StreamBodyReader] = [:]
    /// The file segment whose reads were last placed (`leadToPlaceReads`).
    private var placedSegment = -1
    var onReadable: (@Sendable () -> Void)?

    init(_ segments: [BodySegment]) {
        self.segments = segments
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        var written = 0
        while written < buffer.count, index < segments.count {
            let segment = segments[index]
            let remaining = segment.length - offsetInSegment
            if remaining <= 0 {
                index += 1
                offsetInSegment = 0
                continue
            }
            let space = UnsafeMutableRawBufferPointer(
                rebasing: buffer[written..<min(buffer.count, written + Int(min(remaining, Int64(Int.max))))])
            switch segment {
            case .data(let data):
                data.withUnsafeBytes { bytes in
                    courier_copy_bytes(space.baseAddress!, bytes.baseAddress! + Int(offsetInSegment), space.count)
                }
                written += space.count
                offsetInSegment += Int64(space.count)
            case .file(let path, let offset, _):
                guard let fd = descriptor(for: path) else {
                    return .failed(
                        .fileSystem(.init(message: "Cannot open \(path): \(String(cString: strerror(errno)))")))
                }
                let position = offset + offsetInSegment
                let lead = leadToPlaceReads(buffer: buffer, space: space, position: position)
                if lead == 0 { return .bytes(written) }
                let count = pread(fd, space.baseAddress, lead ?? space.count, off_t(position))
                if count < 0 {
                    if errno == EINTR { continue }
                    return .failed(
                        .fileSystem(.init(message: "Cannot read \(path): \(String(cString: strerror(errno)))")))
                }
                if count == 0 {
                    return .failed(.fileSystem(.init(message: "\(path) is shorter than when the request was made")))
                }
                written += count
                offsetInSegment += Int64(count)
                if lead != nil { return .bytes(written) }
            case .stream(let bridge, let length):
                let reader = streamReaders[index] ?? StreamBodyReader(bridge)
                streamReaders[index] = reader
                reader.onReadable = onReadable
                switch reader.read(into: space) {
                case .bytes(0):
                    return .failed(
                        .serializationFailed(
                            .init(message: "A body stream ended after \(offsetInSegment) of its \(length) bytes")))
                case .bytes(let count):
                    written += count
                    offsetInSegment += Int64(count)
                case .wait:
                    return written > 0 ? .bytes(written) : .wait
                case .failed(let error):
                    return .failed(error)
                }
            }
        }
        return .bytes(written)
    }

    /// A file's bytes are copied by the kernel from the page cache, where byte `position` sits
    /// at `position % 4096` in its page, to `space`. At some distances between the two
    /// (`courier_copy_distance`) that copy is several times slower (Documentation/Benchmarks.md,
    /// "Measurements behind the code"). libcurl passes the same buffer to every read, and
    /// full reads keep the distance, so one short read, at most once per segment, moves the
    /// file position to distance 0 from the buffer's start for all the reads after it.
    ///
    /// Returns nil to read as usual; otherwise the number of bytes to read before returning
    /// (0: return what is written already, the next call starts at the buffer's start).
    private func leadToPlaceReads(
        buffer: UnsafeMutableRawBufferPointer, space: UnsafeMutableRawBufferPointer, position: Int64
    ) -> Int? {
        let page = 4096
        guard placedSegment != index, space.count > page else { return nil }
        // `courier_copy_distance` from the file byte at `position` to `address`.
        func distance(to address: UnsafeMutableRawPointer?) -> Int {
            (Int(bitPattern: address) &- Int(truncatingIfNeeded: position)) & (page - 1)
        }
        let slow = distance(to: space.baseAddress)
        guard slow != 0, slow < courier_slow_copy_distance_limit else { return nil }
        placedSegment = index
        // The distance from the buffer's start; 0 only when something is written already
        // (never return nothing written: libcurl takes 0 bytes for the end of the body).
        let lead = distance(to: buffer.baseAddress)
        guard lead > 0 || space.baseAddress != buffer.baseAddress else { return nil }
        return min(lead, space.count)
    }

    private func descriptor(for path: String) -> Int32? {
        if let fd = descriptors[path] { return fd }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        descriptors[path] = fd
        return fd
    }

    func rewind() -> Bool {
        guard streamReaders.isEmpty else { return false }
        index = 0
        offsetInSegment = 0
        placedSegment = -1
        return true
    }

    func close() {
        for fd in descriptors.values { Foundation.close(fd) }
        descriptors.removeAll()
    }

    deinit {
        close()
    }
}

/// Reads a `StreamBodyBridge`.
final class StreamBodyReader: BodyReader {
    private let bridge: StreamBodyBridge
    var onReadable: (@Sendable () -> Void)?

    init(_ bridge: StreamBodyBridge) {
        self.bridge = bridge
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        bridge.startIfNeeded()
        return bridge.take(into: buffer, onReadable: onReadable)
    }

    func rewind() -> Bool { false }

    func close() {
        bridge.cancel()
    }
}

/// Compresses another reader's bytes with gzip as they are sent.
final class GzipBodyReader: BodyReader {
    private let source: BodyReader
    private var gzip: OpaquePointer?
    private var input: UnsafeMutableRawBufferPointer
    private var inputStart = 0
    private var inputEnd = 0
    private var sourceFinished = false
    private var done = false
    var onReadable: (@Sendable () -> Void)? {
        didSet { source.onReadable = onReadable }
    }

    init(_ source: BodyReader) {
        self.source = source
        self.input = .allocate(byteCount: 64 << 10, alignment: 16)
        self.gzip = courier_gzip_create(6)
    }

    deinit {
        courier_gzip_free(gzip)
        input.deallocate()
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        guard let gzip else { return .failed(.serializationFailed(.init(message: "zlib could not start"))) }
        if done { return .bytes(0) }
        while true {
            if inputStart == inputEnd, !sourceFinished {
                switch source.read(into: input) {
                case .bytes(0): sourceFinished = true
                case .bytes(let count):
                    inputStart = 0
                    inputEnd = count
                case .wait: return .wait
                case .failed(let error): return .failed(error)
                }
            }
            var consumed = 0
            var produced = 0
            let result = courier_gzip_step(
                gzip, input.baseAddress! + inputStart, inputEnd - inputStart, sourceFinished ? 1 : 0,
                buffer.baseAddress, buffer.count, &consumed, &produced)
            inputStart += consumed
            if result < 0 { return .failed(.serializationFailed(.init(message: "zlib failed to compress the body"))) }
            if result == 1 { done = true }
            if produced > 0 || done { return .bytes(produced) }
        }
    }

    func rewind() -> Bool {
        guard source.rewind() else { return false }
        courier_gzip_free(gzip)
        gzip = courier_gzip_create(6)
        inputStart = 0
        inputEnd = 0
        sourceFinished = false
        done = false
        return true
    }

    func close() {
        source.close()
    }
}
