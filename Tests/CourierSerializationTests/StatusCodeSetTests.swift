import CourierSerialization
import Testing

/// `StatusCodeSet` fills ranges a word of its bitmap at a time; these compare every way of
/// building a set with the codes inserted one by one.
struct StatusCodeSetTests {
    /// The set built code by code, the slow and obvious way.
    private func oneByOne(_ codes: some Sequence<Int>) -> StatusCodeSet {
        var set: StatusCodeSet = []
        for code in codes { set.insert(code) }
        return set
    }

    @Test(arguments: [
        200..<300, 0..<1, 63..<65, 64..<128, 0..<1024, 100..<100, 1000..<2000, -5..<3, 127..<129,
    ])
    func aRangeHoldsExactlyItsCodes(range: Range<Int>) {
        let set = StatusCodeSet(range)
        #expect(set == oneByOne(range))
        #expect(Array(set) == Array(range.clamped(to: 0..<1024)))
        #expect(!set.contains(range.upperBound))
        #expect(!set.contains(range.lowerBound - 1))
    }

    @Test func closedRangesArraysAndLiteralsAgree() {
        #expect(StatusCodeSet(200...299) == StatusCodeSet(200..<300))
        #expect(StatusCodeSet([204, 200, 1023, 1024, -1]) == [200, 204, 1023])
        #expect(Array(StatusCodeSet(0...Int.max)) == Array(0..<1024))
        #expect(StatusCodeSet.success.description == "200..<300")
        #expect(StatusCodeSet([301, 302, 303, 307]).description == "301..<304, 307")
    }

    /// A set is held as one range until a code lands apart from it; either way it is the same
    /// set of codes, equal and with the same hash, and a copy changes apart from the original.
    @Test func rangesAndBitmapsAreTheSameSets() {
        var grown: StatusCodeSet = [201]
        grown.insert(200)  // below the range: still one range
        for code in 202..<300 { grown.insert(code) }
        #expect(grown == .success)
        #expect(grown.hashValue == StatusCodeSet.success.hashValue)

        var apart = StatusCodeSet(200..<300)
        let before = apart
        apart.insert(304)  // apart from the range: a bitmap
        #expect(apart != before && before == .success)
        #expect(apart.contains(304) && apart.contains(299) && !apart.contains(300) && !before.contains(304))
        #expect(apart == StatusCodeSet(Array(200..<300) + [304]))
        #expect(apart.hashValue == StatusCodeSet(Array(200..<300) + [304]).hashValue)
        #expect(apart.description == "200..<300, 304")

        var copy = apart
        copy.insert(500)
        #expect(copy.contains(500) && !apart.contains(500))
        #expect(StatusCodeSet([]) == StatusCodeSet(5..<5))
        #expect(Set([StatusCodeSet(200..<300), grown, apart]).count == 2)
    }
}
