;; MXFP4 scale histogram straight from bfloat16 or float32 bit patterns, equal to the exponent-only
;; pass of src/checkpoint/exponent-scan.ts: per block of 32 elements along a row (the last block of a
;; row may be partial), the largest 8-bit exponent field F gives the scale byte mxfp4ScaleByte gives
;; (0xFF for F = 255, NaN/Inf; else max(F − 2, 0)), and that byte's u32 counter is incremented.
;; Both formats are read as u16 lanes: a bfloat16's field sits in bits 7..14 of its lane, and so does a
;; float32's in its upper lane (the lower lane, all mantissa, is masked to 0), so one i16x8.max_u
;; reduction serves both.
(module
  (import "env" "memory" (memory 1))

  ;; Counters: 0..1023, one u32 per scale byte, added to by every call.

  ;; `rows` contiguous rows of `rowLength` elements at $p: 2 bytes each ($wide = 0, bfloat16) or 4
  ;; ($wide = 1, float32).
  (func (export "scale_histogram") (param $p i32) (param $rows i32) (param $rowLength i32) (param $wide i32)
    (local $mask v128) (local $m v128) (local $rowEnd i32) (local $blockEnd i32) (local $field i32) (local $elementField i32) (local $counter i32)
    (local.set $mask (i32x4.splat (select (i32.const 0x7f800000) (i32.const 0x7f807f80) (local.get $wide))))
    (block $done
      (loop $rowLoop
        (br_if $done (i32.eqz (local.get $rows)))
        (local.set $rowEnd (i32.add (local.get $p) (i32.shl (local.get $rowLength) (i32.add (local.get $wide) (i32.const 1)))))
        (block $rowDone
          (loop $blockLoop
            (br_if $rowDone (i32.ge_u (local.get $p) (local.get $rowEnd)))
            (local.set $blockEnd (i32.add (local.get $p) (i32.shl (i32.const 64) (local.get $wide))))
            (if (i32.le_u (local.get $blockEnd) (local.get $rowEnd))
              (then
                ;; A whole block, 64 bytes a turn: all of a bfloat16 block, half of a float32 one.
                (local.set $m (v128.const i64x2 0 0))
                (loop $vectors
                  (local.set $m
                    (i16x8.max_u (local.get $m)
                      (i16x8.max_u
                        (i16x8.max_u (v128.and (v128.load (local.get $p)) (local.get $mask))
                                     (v128.and (v128.load offset=16 (local.get $p)) (local.get $mask)))
                        (i16x8.max_u (v128.and (v128.load offset=32 (local.get $p)) (local.get $mask))
                                     (v128.and (v128.load offset=48 (local.get $p)) (local.get $mask))))))
                  (local.set $p (i32.add (local.get $p) (i32.const 64)))
                  (br_if $vectors (i32.lt_u (local.get $p) (local.get $blockEnd))))
                (local.set $m (i16x8.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
                (local.set $m (i16x8.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
                (local.set $m (i16x8.max_u (local.get $m) (i8x16.shuffle 2 3 0 1 6 7 4 5 10 11 8 9 14 15 12 13 (local.get $m) (local.get $m))))
                (local.set $field (i32.shr_u (i16x8.extract_lane_u 0 (local.get $m)) (i32.const 7))))
              (else
                ;; The row's partial last block, element by element (a float32's upper u16 is at +2).
                (local.set $field (i32.const 0))
                (loop $elements
                  (local.set $field
                    (select (local.get $field)
                      (local.tee $elementField (i32.and (i32.shr_u (i32.load16_u (i32.add (local.get $p) (i32.shl (local.get $wide) (i32.const 1)))) (i32.const 7)) (i32.const 0xff)))
                      (i32.ge_u (local.get $field) (local.get $elementField))))
                  (local.set $p (i32.add (local.get $p) (i32.shl (i32.const 2) (local.get $wide))))
                  (br_if $elements (i32.lt_u (local.get $p) (local.get $rowEnd))))))
            ;; mxfp4ScaleByte, as the byte's counter address.
            (local.set $counter
              (i32.shl
                (select (i32.const 255)
                  (select (i32.sub (local.get $field) (i32.const 2)) (i32.const 0) (i32.gt_u (local.get $field) (i32.const 2)))
                  (i32.eq (local.get $field) (i32.const 255)))
                (i32.const 2)))
            (i32.store (local.get $counter) (i32.add (i32.load (local.get $counter)) (i32.const 1)))
            (br $blockLoop)))
        (local.set $rows (i32.sub (local.get $rows) (i32.const 1)))
        (br $rowLoop))))

  ;; The full pass's counts over `blocks` whole blocks of 32 (rows made of whole blocks), as
  ;; src/checkpoint/exponent-scan.ts counts them. Each block's scale byte goes to the counters at 0;
  ;; for a block whose largest exponent field F is in [5, 254] saturated, kept (not flushed) and
  ;; non-zero elements are added to the u32 totals at TOTALS (+0, +4, +8): saturated ⇔ magnitude ≥
  ;; F.11 (1.m ≥ 1.75 at the top binade), kept ⇔ magnitude > (F − 4).0 (subnormals sit below it),
  ;; non-zero ⇔ magnitude ≥ 1. Other blocks (clamped or NaN scale) are left to the caller: their
  ;; indices are appended as u32 at $slow, and their number is returned.
  (func $addTotals (param $totals i32) (param $saturated v128) (param $kept v128) (param $nonZero v128)
    ;; Lanes hold minus the counts (masks are −1); sum the four i32 lanes of each.
    (local.set $saturated (i32x4.add (local.get $saturated) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $saturated) (local.get $saturated))))
    (local.set $kept (i32x4.add (local.get $kept) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $kept) (local.get $kept))))
    (local.set $nonZero (i32x4.add (local.get $nonZero) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $nonZero) (local.get $nonZero))))
    (i32.store (local.get $totals) (i32.sub (i32.load (local.get $totals))
      (i32.add (i32x4.extract_lane 0 (local.get $saturated)) (i32x4.extract_lane 1 (local.get $saturated)))))
    (i32.store offset=4 (local.get $totals) (i32.sub (i32.load offset=4 (local.get $totals))
      (i32.add (i32x4.extract_lane 0 (local.get $kept)) (i32x4.extract_lane 1 (local.get $kept)))))
    (i32.store offset=8 (local.get $totals) (i32.sub (i32.load offset=8 (local.get $totals))
      (i32.add (i32x4.extract_lane 0 (local.get $nonZero)) (i32x4.extract_lane 1 (local.get $nonZero))))))

  ;; bfloat16: a block is 64 bytes, four vectors of eight 15-bit magnitudes. Comparisons are the one
  ;; native signed greater-than against threshold − 1, and their masks (−1 per hit) add up in i16
  ;; lanes across blocks: at most 4 per lane per block, so a call's ≤ 8191 blocks cannot overflow.
  ;; The max reduction leaves the block's largest magnitude in every lane, so the thresholds are
  ;; made from it in vector registers. Every kernel bumps the scale counter inline: V8 does not
  ;; inline WebAssembly calls, and a call per block cost the bfloat16 kernel about a quarter of its speed.
  (func (export "block_counts_bf16") (param $p i32) (param $blocks i32) (param $totals i32) (param $slow i32) (result i32)
    (local $start i32) (local $end i32) (local $slowCount i32) (local $field i32) (local $counter i32)
    (local $m0 v128) (local $m1 v128) (local $m2 v128) (local $m3 v128) (local $m v128)
    (local $top v128) (local $sat v128) (local $keep v128)
    (local $saturated v128) (local $kept v128) (local $nonZero v128)
    (local.set $start (local.get $p))
    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $blocks) (i32.const 6))))
    (block $done
      (loop $blockLoop
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $m0 (v128.and (v128.load (local.get $p)) (v128.const i16x8 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff)))
        (local.set $m1 (v128.and (v128.load offset=16 (local.get $p)) (v128.const i16x8 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff)))
        (local.set $m2 (v128.and (v128.load offset=32 (local.get $p)) (v128.const i16x8 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff)))
        (local.set $m3 (v128.and (v128.load offset=48 (local.get $p)) (v128.const i16x8 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff 0x7fff)))
        (local.set $m (i16x8.max_s (i16x8.max_s (local.get $m0) (local.get $m1)) (i16x8.max_s (local.get $m2) (local.get $m3))))
        (local.set $m (i16x8.max_s (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
        (local.set $m (i16x8.max_s (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
        (local.set $m (i16x8.max_s (local.get $m) (i8x16.shuffle 2 3 0 1 6 7 4 5 10 11 8 9 14 15 12 13 (local.get $m) (local.get $m))))
        (local.set $field (i32.shr_u (i16x8.extract_lane_u 0 (local.get $m)) (i32.const 7)))
        ;; mxfp4ScaleByte, as the byte's counter address.
        (local.set $counter
          (i32.shl
            (select (i32.const 255)
              (select (i32.sub (local.get $field) (i32.const 2)) (i32.const 0) (i32.gt_u (local.get $field) (i32.const 2)))
              (i32.eq (local.get $field) (i32.const 255)))
            (i32.const 2)))
        (i32.store (local.get $counter) (i32.add (i32.load (local.get $counter)) (i32.const 1)))
        (if (i32.or (i32.lt_u (local.get $field) (i32.const 5)) (i32.eq (local.get $field) (i32.const 255)))
          (then
            (i32.store (i32.add (local.get $slow) (i32.shl (local.get $slowCount) (i32.const 2)))
              (i32.shr_u (i32.sub (local.get $p) (local.get $start)) (i32.const 6)))
            (local.set $slowCount (i32.add (local.get $slowCount) (i32.const 1))))
          (else
            ;; F << 7 in every lane; saturated ⇔ > F.1011111, kept ⇔ > (F − 4).0000000.
            (local.set $top (v128.and (local.get $m) (v128.const i16x8 0x7f80 0x7f80 0x7f80 0x7f80 0x7f80 0x7f80 0x7f80 0x7f80)))
            (local.set $sat (v128.or (local.get $top) (v128.const i16x8 0x5f 0x5f 0x5f 0x5f 0x5f 0x5f 0x5f 0x5f)))
            (local.set $keep (i16x8.sub (local.get $top) (v128.const i16x8 0x200 0x200 0x200 0x200 0x200 0x200 0x200 0x200)))
            (local.set $saturated (i16x8.add (local.get $saturated)
              (i16x8.add (i16x8.add (i16x8.gt_s (local.get $m0) (local.get $sat)) (i16x8.gt_s (local.get $m1) (local.get $sat)))
                         (i16x8.add (i16x8.gt_s (local.get $m2) (local.get $sat)) (i16x8.gt_s (local.get $m3) (local.get $sat))))))
            (local.set $kept (i16x8.add (local.get $kept)
              (i16x8.add (i16x8.add (i16x8.gt_s (local.get $m0) (local.get $keep)) (i16x8.gt_s (local.get $m1) (local.get $keep)))
                         (i16x8.add (i16x8.gt_s (local.get $m2) (local.get $keep)) (i16x8.gt_s (local.get $m3) (local.get $keep))))))
            (local.set $nonZero (i16x8.add (local.get $nonZero)
              (i16x8.add (i16x8.add (i16x8.gt_s (local.get $m0) (v128.const i64x2 0 0)) (i16x8.gt_s (local.get $m1) (v128.const i64x2 0 0)))
                         (i16x8.add (i16x8.gt_s (local.get $m2) (v128.const i64x2 0 0)) (i16x8.gt_s (local.get $m3) (v128.const i64x2 0 0))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 64)))
        (br $blockLoop)))
    (call $addTotals (local.get $totals)
      (i32x4.extadd_pairwise_i16x8_s (local.get $saturated))
      (i32x4.extadd_pairwise_i16x8_s (local.get $kept))
      (i32x4.extadd_pairwise_i16x8_s (local.get $nonZero)))
    (local.get $slowCount))

  ;; float32: a block is 128 bytes, eight vectors of four 31-bit magnitudes.
  (func (export "block_counts_f32") (param $p i32) (param $blocks i32) (param $totals i32) (param $slow i32) (result i32)
    (local $block i32) (local $slowCount i32) (local $field i32) (local $counter i32) (local $q i32) (local $end i32)
    (local $x v128) (local $m v128) (local $sat v128) (local $keep v128)
    (local $saturated v128) (local $kept v128) (local $nonZero v128)
    (block $done
      (loop $blockLoop
        (br_if $done (i32.ge_u (local.get $block) (local.get $blocks)))
        (local.set $end (i32.add (local.get $p) (i32.const 128)))
        (local.set $m (v128.const i32x4 0 0 0 0))
        (local.set $q (local.get $p))
        (loop $maxes
          (local.set $m (i32x4.max_u (local.get $m) (v128.and (v128.load (local.get $q)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br_if $maxes (i32.lt_u (local.get $q) (local.get $end))))
        (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $m) (local.get $m))))
        (local.set $m (i32x4.max_u (local.get $m) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $m) (local.get $m))))
        (local.set $field (i32.shr_u (i32x4.extract_lane 0 (local.get $m)) (i32.const 23)))
        ;; mxfp4ScaleByte, as the byte's counter address.
        (local.set $counter
          (i32.shl
            (select (i32.const 255)
              (select (i32.sub (local.get $field) (i32.const 2)) (i32.const 0) (i32.gt_u (local.get $field) (i32.const 2)))
              (i32.eq (local.get $field) (i32.const 255)))
            (i32.const 2)))
        (i32.store (local.get $counter) (i32.add (i32.load (local.get $counter)) (i32.const 1)))
        (if (i32.or (i32.lt_u (local.get $field) (i32.const 5)) (i32.eq (local.get $field) (i32.const 255)))
          (then
            (i32.store (i32.add (local.get $slow) (i32.shl (local.get $slowCount) (i32.const 2))) (local.get $block))
            (local.set $slowCount (i32.add (local.get $slowCount) (i32.const 1))))
          (else
            (local.set $sat (i32x4.splat (i32.or (i32.shl (local.get $field) (i32.const 23)) (i32.const 0x600000))))
            (local.set $keep (i32x4.splat (i32.add (i32.shl (i32.sub (local.get $field) (i32.const 4)) (i32.const 23)) (i32.const 1))))
            (local.set $q (local.get $p))
            (loop $counts
              (local.set $x (v128.and (v128.load (local.get $q)) (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff)))
              (local.set $saturated (i32x4.add (local.get $saturated) (i32x4.ge_s (local.get $x) (local.get $sat))))
              (local.set $kept (i32x4.add (local.get $kept) (i32x4.ge_s (local.get $x) (local.get $keep))))
              (local.set $nonZero (i32x4.add (local.get $nonZero) (i32x4.ge_s (local.get $x) (v128.const i32x4 1 1 1 1))))
              (local.set $q (i32.add (local.get $q) (i32.const 16)))
              (br_if $counts (i32.lt_u (local.get $q) (local.get $end))))))
        (local.set $p (local.get $end))
        (local.set $block (i32.add (local.get $block) (i32.const 1)))
        (br $blockLoop)))
    (call $addTotals (local.get $totals) (local.get $saturated) (local.get $kept) (local.get $nonZero))
    (local.get $slowCount))

  ;; float32 from bfloat16: each of `count` u16 words at $src (any even address) becomes the u32 word
  ;; << 16 at $dst, 8 a turn (a zero extension and a shift per 4 outputs: a two-source byte shuffle
  ;; against a zero vector cost V8 more instructions), the rest one by one. The checkpoint analysis decodes its SQNR sample rows with it
  ;; straight from the chunk buffers; src/checkpoint/dtypes.ts's decodeInto is the reference.
  (func (export "decode_bf16") (param $src i32) (param $dst i32) (param $count i32)
    (local $end i32) (local $x v128)
    (local.set $end (i32.add (local.get $src) (i32.shl (i32.and (local.get $count) (i32.const -8)) (i32.const 1))))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $src) (local.get $end)))
        (local.set $x (v128.load (local.get $src)))
        (v128.store (local.get $dst) (i32x4.shl (i32x4.extend_low_i16x8_u (local.get $x)) (i32.const 16)))
        (v128.store offset=16 (local.get $dst) (i32x4.shl (i32x4.extend_high_i16x8_u (local.get $x)) (i32.const 16)))
        (local.set $src (i32.add (local.get $src) (i32.const 16)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 32)))
        (br $vectors)))
    (local.set $end (i32.add (local.get $src) (i32.shl (i32.and (local.get $count) (i32.const 7)) (i32.const 1))))
    (block $done
      (loop $elements
        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))
        (i32.store (local.get $dst) (i32.shl (i32.load16_u (local.get $src)) (i32.const 16)))
        (local.set $src (i32.add (local.get $src) (i32.const 2)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
        (br $elements))))
)
