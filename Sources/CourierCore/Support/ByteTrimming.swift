extension RandomAccessCollection<UInt8> where Index == Int {
    /// `range` without the spaces and tabs at either end (HTTP's optional whitespace, RFC 9110
    /// section 5.6.3), nor `extra` when given (a quote around a directive's value, say).
    @inlinable
    package func trimmingWhitespace(_ range: Range<Int>, also extra: UInt8? = nil) -> Range<Int> {
        func isTrimmed(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == extra }
        var lower = range.lowerBound
        var upper = range.upperBound
        while lower < upper, isTrimmed(self[lower]) { lower += 1 }
        while upper > lower, isTrimmed(self[upper - 1]) { upper -= 1 }
        return lower..<upper
    }
}
