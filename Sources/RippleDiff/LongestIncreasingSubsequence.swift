/// Marks the positions of `sequence` that lie on one longest strictly increasing subsequence of
/// its non-negative values (negative values are gaps and are never marked).
///
/// Patience sorting: `tails[k]` is the position ending the best increasing run of length `k + 1`
/// found so far, `previous` links each position to the one before it on its run. Sequences that
/// are mostly in order (the usual diff) take the O(1) append path for almost every element.
///
/// - Complexity: O(n log n) time, O(n) memory.
@usableFromInline
internal func _longestIncreasingSubsequence(_ sequence: [Int32]) -> [Bool] {
    let count = sequence.count
    var onSubsequence = [Bool](repeating: false, count: count)
    if count == 0 { return onSubsequence }
    var previous = [Int32](repeating: -1, count: count)
    var tails = [Int32](repeating: 0, count: count)
    var length = 0

    sequence.withUnsafeBufferPointer { values in
        previous.withUnsafeMutableBufferPointer { previous in
            tails.withUnsafeMutableBufferPointer { tails in
                for position in 0..<count {
                    let value = values[position]
                    if value < 0 { continue }
                    if length == 0 || values[Int(tails[length - 1])] < value {
                        previous[position] = length > 0 ? tails[length - 1] : -1
                        tails[length] = Int32(position)
                        length += 1
                        continue
                    }
                    // First run whose tail value is >= value: replace its tail.
                    var low = 0
                    var high = length - 1
                    while low < high {
                        let middle = (low + high) >> 1
                        if values[Int(tails[middle])] < value { low = middle + 1 } else { high = middle }
                    }
                    previous[position] = low > 0 ? tails[low - 1] : -1
                    tails[low] = Int32(position)
                }
            }
        }
    }
    if length > 0 {
        var position = Int(tails[length - 1])
        while position >= 0 {
            onSubsequence[position] = true
            position = Int(previous[position])
        }
    }
    return onSubsequence
}
