import CFuzzDriver
import Foundation

/// The program's entry point (SwiftPM calls an executable's `main` by the module's name): hands
/// the command line to libFuzzer's driver, whose options (`-max_total_time`, corpus
/// directories) it takes.
@_cdecl("CourierFuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { bytes, size in
        fuzzOneInput(bytes!, size)
    }
}

/// libFuzzer's entry point: the target named by `COURIER_FUZZ_TARGET` gets every input.
/// A property that does not hold traps (`fuzzCheck`), which libFuzzer reports as a crash with
/// the input that caused it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    target(data)
    return 0
}

/// The target, read once.
private let target: @Sendable (Data) -> Void = {
    let name = ProcessInfo.processInfo.environment["COURIER_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTargets.all[name] else {
        let names = FuzzTargets.all.keys.sorted().joined(separator: ", ")
        FileHandle.standardError.write(Data("COURIER_FUZZ_TARGET must be one of: \(names)\n".utf8))
        exit(2)
    }
    return target
}()

/// Traps with `message` when `condition` is false: a finding.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        FileHandle.standardError.write(Data("courier-fuzz: property failed: \(message())\n".utf8))
        abort()
    }
}

extension Data {
    /// The input cut at NUL bytes, each piece read as UTF-8 (invalid bytes repaired).
    var fields: [String] {
        split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    var text: String { String(decoding: self, as: UTF8.self) }
}
