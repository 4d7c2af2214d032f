import Courier
import Foundation

/// Shows transfer progress on standard error: a bar that redraws itself on a terminal (bytes,
/// rate, time left), plain lines at most once a second otherwise.
final class ProgressDisplay: @unchecked Sendable {
    // `@unchecked Sendable`: `lock` guards every var.
    private let lock = NSLock()
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let start = Date()
    /// When the last line was written. Plain lines start a second in: a line at once would
    /// say "0 B at 0 B/s" before anything moved.
    private lazy var lastLine = isTerminal ? Date.distantPast : start
    private var lastValue: TransferProgress?
    private var drew = false

    func show(_ progress: TransferProgress, verb: String) {
        lock.lock()
        defer { lock.unlock() }
        lastValue = progress
        let now = Date()
        if isTerminal {
            guard now.timeIntervalSince(lastLine) >= 0.1 else { return }
            lastLine = now
            write("\r" + bar(progress, elapsed: now.timeIntervalSince(start)) + "\u{1B}[K")
            drew = true
        } else {
            guard now.timeIntervalSince(lastLine) >= 1 else { return }
            lastLine = now
            write(line(progress, verb: verb, elapsed: now.timeIntervalSince(start)) + "\n")
        }
    }

    /// Draws the last value once more and ends the line.
    func finish(verb: String = "done") {
        lock.lock()
        defer { lock.unlock() }
        guard let lastValue else { return }
        let elapsed = Date().timeIntervalSince(start)
        if isTerminal {
            write("\r" + bar(lastValue, elapsed: elapsed) + "\u{1B}[K\n")
        } else {
            write(line(lastValue, verb: verb, elapsed: elapsed) + "\n")
        }
    }

    func bar(_ progress: TransferProgress, elapsed: TimeInterval) -> String {
        let width = 30
        let rate = elapsed > 0 ? Double(progress.completedBytes) / elapsed : 0
        var text: String
        if let total = progress.totalBytes, total > 0 {
            let filled = Int(progress.fractionCompleted * Double(width))
            let arrow = filled < width ? ">" : ""
            text =
                "[" + String(repeating: "=", count: filled) + arrow
                + String(repeating: " ", count: max(0, width - filled - arrow.count)) + "] "
            text += String(format: "%3d%% ", Int(progress.fractionCompleted * 100))
            text += "\(Self.bytes(progress.completedBytes))/\(Self.bytes(total))"
            if rate > 0, progress.completedBytes < total {
                text += "  ETA \(Self.duration(Double(total - progress.completedBytes) / rate))"
            }
        } else {
            text = Self.bytes(progress.completedBytes)
        }
        return text + "  \(Self.bytes(Int64(rate)))/s"
    }

    func line(_ progress: TransferProgress, verb: String, elapsed: TimeInterval) -> String {
        let rate = elapsed > 0 ? Double(progress.completedBytes) / elapsed : 0
        var text = "\(verb) \(Self.bytes(progress.completedBytes))"
        if let total = progress.totalBytes {
            text += " of \(Self.bytes(total)) (\(Int(progress.fractionCompleted * 100))%)"
        }
        return text + " at \(Self.bytes(Int64(rate)))/s"
    }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 3600
            ? String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
            : String(format: "%d:%02d", total / 60, total % 60)
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
