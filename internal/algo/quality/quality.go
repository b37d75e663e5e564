// Package quality measures detections against ground-truth labels: precision@n, ROC AUC,
// precision, recall and F1 — the figures the benchmark tables and the demo report.
package quality

import (
	"math"
	"sort"
)

// ROCAUC is the area under the ROC curve of scores (higher = more outlying) against the
// labels: the probability that a random outlier scores above a random inlier, ties counting
// one half (the Mann-Whitney statistic with mid-ranks). NaN when either class is empty.
func ROCAUC(scores []float64, outlier []bool) float64 {
	n := len(scores)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	var pos, neg float64
	var rankSumPos float64
	for i := 0; i < n; {
		j := i
		for j < n && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(float64(i+j+1) / 2) // mean of the 1-based ranks i+1..j (rounded: never fused)
		for _, r := range idx[i:j] {
			if outlier[r] {
				pos++
				rankSumPos += mid
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSumPos - float64(pos*(pos+1)/2)) / (pos * neg)
}

// PrecisionAtN is the fraction of true outliers among the given flagged rows (the top-n,
// ties included). NaN when nothing is flagged.
func PrecisionAtN(flagged []int, outlier []bool) float64 {
	if len(flagged) == 0 {
		return math.NaN()
	}
	tp := 0
	for _, r := range flagged {
		if outlier[r] {
			tp++
		}
	}
	return float64(tp) / float64(len(flagged))
}

// Confusion counts a binary detection against the labels.
type Confusion struct{ TP, FP, FN, TN int }

// Count builds the confusion counts of flags against labels.
func Count(flag, outlier []bool) Confusion {
	var c Confusion
	for i, f := range flag {
		switch {
		case f && outlier[i]:
			c.TP++
		case f:
			c.FP++
		case outlier[i]:
			c.FN++
		default:
			c.TN++
		}
	}
	return c
}

// Precision is TP/(TP+FP), 0 when nothing is flagged (the paper records an empty detection as F1 = 0).
func (c Confusion) Precision() float64 { return ratio(c.TP, c.TP+c.FP) }

// Recall is TP/(TP+FN), 0 when there is no outlier.
func (c Confusion) Recall() float64 { return ratio(c.TP, c.TP+c.FN) }

// F1 is the harmonic mean of precision and recall, 0 when both are 0.
func (c Confusion) F1() float64 {
	p, r := c.Precision(), c.Recall()
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// AveragePrecision is the area under the precision-recall curve of scores (higher = more
// outlying) against the labels, as a step sum over the distinct score thresholds from the top:
// AP = sum over thresholds of (recall gained) * (precision at that threshold). Tied scores form
// one threshold (no order is invented among them), which is scikit-learn's
// average_precision_score. A random ranking scores about the outlier fraction, a perfect one 1.
// NaN when there is no outlier.
func AveragePrecision(scores []float64, outlier []bool) float64 {
	n := len(scores)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	pos := 0
	for _, o := range outlier {
		if o {
			pos++
		}
	}
	if pos == 0 {
		return math.NaN()
	}
	// The precisions are summed weighted by their gains and divided by pos once: each term is
	// at most its gain, so the sum is at most pos and AP at most 1 (adding gain/pos x precision
	// per score rounded past 1: 1.0000000000000164 for 3,001 rows all outliers).
	var sum float64
	tp, seen := 0, 0
	for i := 0; i < n; {
		j, gain := i, 0
		for j < n && scores[idx[j]] == scores[idx[i]] {
			if outlier[idx[j]] {
				gain++
			}
			j++
		}
		tp += gain
		seen += j - i
		sum += float64(float64(gain) * (float64(tp) / float64(seen))) // (no fused multiply-add: .ci/nofma.sh)
		i = j
	}
	return sum / float64(pos)
}

// AdjustedRandIndex is the adjusted Rand index (Hubert and Arabie 1985) of two partitions of the
// same items, a[i] and b[i] being item i's class in each (any int32 labels; a PROCLUS outlier's
// -1 is a class of its own): the share of item pairs on which they agree, corrected for chance,
// so that 1 is identical partitions (up to renaming) and a random one scores about 0. It is
// scikit-learn's adjusted_rand_score, 1 when both put every item in one class or each in its own
// (the index is undefined there). It panics when the lengths differ.
func AdjustedRandIndex(a, b []int32) float64 {
	if len(a) != len(b) {
		panic("quality.AdjustedRandIndex: partitions of different lengths")
	}
	type pair struct{ x, y int32 }
	cell, row, col := map[pair]int{}, map[int32]int{}, map[int32]int{}
	for i := range a {
		cell[pair{a[i], b[i]}]++
		row[a[i]]++
		col[b[i]]++
	}
	c2 := func(n int) float64 { return float64(float64(n) * float64(n-1) / 2) } // (rounded: never fused into the sums)
	var index, sa, sb float64
	for _, n := range cell {
		index += c2(n)
	}
	for _, n := range row {
		sa += c2(n)
	}
	for _, n := range col {
		sb += c2(n)
	}
	expected := sa * sb / c2(len(a))
	maxIndex := float64((sa + sb) / 2)
	if maxIndex == expected {
		return 1
	}
	return (index - expected) / (maxIndex - expected)
}
