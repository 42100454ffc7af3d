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
)
