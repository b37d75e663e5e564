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
		mid := float64(i+j+1) / 2 // mean of the 1-based ranks i+1..j
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
	return (rankSumPos - pos*(pos+1)/2) / (pos * neg)
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
// outlying) as scikit-learn's average_precision_score computes it: rows are taken in
// descending score, a run of tied scores is one threshold, and AP = sum over thresholds of
// (R_t - R_{t-1}) * P_t. It weighs the top of the ranking, which is what an alarm budget
// sees, where ROC AUC weighs every rank alike. NaN when there is no outlier.
func AveragePrecision(scores []float64, outlier []bool) float64 {
	n := len(scores)
	idx := make([]int, n)
	pos := 0
	for i := range idx {
		idx[i] = i
		if outlier[i] {
			pos++
		}
	}
	if pos == 0 {
		return math.NaN()
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	var ap float64
	tp := 0
	for i := 0; i < n; {
		j := i
		before := tp
		for j < n && scores[idx[j]] == scores[idx[i]] {
			if outlier[idx[j]] {
				tp++
			}
			j++
		}
		if tp > before {
			ap += float64(tp-before) / float64(pos) * float64(tp) / float64(j)
		}
		i = j
	}
	return ap
}
