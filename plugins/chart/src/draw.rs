//! Drawing a bar chart into pixels, and the pixels into a PNG file. Pure
//! logic, tested natively.

/// An RGB colour.
type Rgb = [u8; 3];

const BACKGROUND: Rgb = [0xff, 0xff, 0xff];
const AXIS: Rgb = [0x33, 0x33, 0x33];
/// The bars' colours, in turn.
const BARS: [Rgb; 4] = [
    [0x1f, 0x77, 0xb4],
    [0xff, 0x7f, 0x0e],
    [0x2c, 0xa0, 0x2c],
    [0xd6, 0x27, 0x28],
];
/// The blank border around the plot, in pixels.
const MARGIN: u32 = 8;

/// A picture of `width` × `height` RGB pixels, row by row.
pub struct Picture {
    pub width: u32,
    pub height: u32,
    pixels: Vec<u8>,
}

impl Picture {
    fn new(width: u32, height: u32) -> Picture {
        let len = width as usize * height as usize;
        Picture {
            width,
            height,
            pixels: BACKGROUND.repeat(len),
        }
    }

    /// The colour at (`x`, `y`), from the top left.
    #[cfg(test)]
    fn at(&self, x: u32, y: u32) -> Rgb {
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }

    /// Fills the rectangle from (`x0`, `y0`) to (`x1`, `y1`), both excluded
    /// past the picture's edge.
    fn fill(&mut self, (x0, y0): (u32, u32), (x1, y1): (u32, u32), colour: Rgb) {
        for y in y0..y1.min(self.height) {
            for x in x0..x1.min(self.width) {
                let i = (y as usize * self.width as usize + x as usize) * 3;
                self.pixels[i..i + 3].copy_from_slice(&colour);
            }
        }
    }

    /// The picture as a PNG file (8-bit RGB).
    pub fn png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let mut file = Vec::new();
        let mut encoder = png::Encoder::new(&mut file, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&self.pixels)?;
        writer.finish()?;
        Ok(file)
    }
}

/// A bar chart of `values` (at least one): a bar per value, in turn
/// coloured, rising from the zero line (falling, for a negative value),
/// scaled so that the largest reaches the top of the plot; the zero line
/// drawn across. `width` and `height` are at least `4 * MARGIN`.
pub fn bar_chart(values: &[f64], width: u32, height: u32) -> Picture {
    let mut picture = Picture::new(width, height);
    let (left, top) = (MARGIN, MARGIN);
    let (plot_w, plot_h) = (width - 2 * MARGIN, height - 2 * MARGIN);
    let lo = values.iter().copied().fold(0.0_f64, f64::min);
    let hi = values.iter().copied().fold(0.0_f64, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    // The row of a value, from the top of the picture.
    let row = |v: f64| -> u32 {
        let fraction = ((hi - v) / span).clamp(0.0, 1.0);
        // In range: `fraction * plot_h` is between 0 and `plot_h`.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let offset = (fraction * f64::from(plot_h)).round() as u32;
        top + offset
    };
    let zero = row(0.0);
    let count = u32::try_from(values.len()).unwrap_or(u32::MAX).max(1);
    let slot = (plot_w / count).max(1);
    let bar = (slot * 7 / 10).max(1);
    for ((i, &v), colour) in (0u32..).zip(values).zip(BARS.iter().cycle()) {
        let x0 = left + i * slot + (slot - bar) / 2;
        let y = row(v);
        let (y0, y1) = if y <= zero { (y, zero) } else { (zero, y) };
        picture.fill((x0, y0), (x0 + bar, y1.max(y0 + 1)), *colour);
    }
    picture.fill((left, zero), (left + plot_w, zero + 1), AXIS);
    picture
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_rise_from_the_zero_line_in_their_colours() {
        let p = bar_chart(&[1.0, 2.0], 48, 48);
        // Two slots of 16 pixels from x = 8; bars 11 wide, centred.
        let (first, second) = (8 + 8, 8 + 16 + 8);
        // The taller bar reaches the top of the plot; the shorter half way.
        assert_eq!(p.at(second, 8), BARS[1]);
        assert_eq!(p.at(first, 8), BACKGROUND);
        assert_eq!(p.at(first, 8 + 17), BARS[0]);
        // The zero line, at the bottom of the plot.
        assert_eq!(p.at(8, 40), AXIS);
        assert_eq!(p.at(0, 40), BACKGROUND, "the margin stays blank");
    }

    #[test]
    fn a_negative_value_falls_below_the_zero_line() {
        let p = bar_chart(&[-1.0, 1.0], 48, 48);
        // Zero is half way down the plot (row 24).
        assert_eq!(p.at(8, 24), AXIS);
        assert_eq!(p.at(16, 30), BARS[0], "below");
        assert_eq!(p.at(16, 18), BACKGROUND);
        assert_eq!(p.at(32, 18), BARS[1], "above");
    }

    #[test]
    fn the_png_decodes_to_the_same_picture() {
        let p = bar_chart(&[3.0, 1.0, 2.0], 64, 40);
        let file = p.png().unwrap();
        assert!(file.starts_with(b"\x89PNG\r\n\x1a\n"));
        let decoder = png::Decoder::new(std::io::Cursor::new(file));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (64, 40));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(&pixels[..info.buffer_size()], &p.pixels[..]);
    }
}
