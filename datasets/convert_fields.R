# Extract spatial climate datasets of the R package 'fields' as data frames.
#
# Source: Debian package r-cran-fields 14.1-1 (bookworm), R package fields 14.1
# by Douglas Nychka, Reinhard Furrer, John Paige, Stephan Sain et al.,
# licence GPL (>= 2).
#
# This script is step 1 of 2 and is normally run by datasets/convert_fields.py,
# which turns the .rds files written here into the CSV files of this folder:
#
#     Rscript datasets/convert_fields.R OUTDIR    # writes OUTDIR/<name>.rds
#
# Each .rds file holds one data.frame: numeric columns are double, identifiers
# are character, rows keep the order of the fields objects, NA marks missing.
# Binary .rds keeps every double exactly; the decimal formatting happens in
# Python, whose float parsing and printing are exact (R's parser is not: it
# reads "374.46407241" as 374.46407240999997).

suppressPackageStartupMessages(library(fields))

args <- commandArgs(trailingOnly = TRUE)
stopifnot(length(args) == 1, dir.exists(args[1]))
out_dir <- args[1]

write_dataset <- function(df, name) {
  df[] <- lapply(df, function(col) if (is.numeric(col)) as.double(col) else as.character(col))
  rownames(df) <- NULL
  saveRDS(df, file.path(out_dir, paste0(name, ".rds")))
}

# North American summer (JJA) precipitation, 1720 stations --------------------
data(NorthAmericanRainfall)
nar <- NorthAmericanRainfall
write_dataset(data.frame(
  lon = nar$longitude,
  lat = nar$latitude,
  elevation = nar$elevation,
  precipitation = nar$precip,
  precipitation_se = nar$precipSE,
  trend = nar$trend,
  trend_se = nar$trendSE,
  type = as.character(nar$type),
  stereo_x = nar$x.s[, 1],
  stereo_y = nar$x.s[, 2]
), "north_american_rainfall")

# Colorado spring (MAM) climatological temperatures -----------------------------
# fields' CO.tmean.MAM.climate is (tmin + tmin) / 2, a typo in its creation
# script, so the mean is recomputed here as (tmax + tmin) / 2.  Stations
# without a 1960-1989 climatology (NA in fields) are dropped.
data(COmonthlyMet)
keep <- !is.na(CO.tmax.MAM.climate) & !is.na(CO.tmin.MAM.climate)
write_dataset(data.frame(
  station = CO.id[keep],
  lon = CO.loc$lon[keep],
  lat = CO.loc$lat[keep],
  elevation = CO.elev[keep],
  tmax_mam = CO.tmax.MAM.climate[keep],
  tmin_mam = CO.tmin.MAM.climate[keep],
  tmean_mam = (CO.tmax.MAM.climate[keep] + CO.tmin.MAM.climate[keep]) / 2
), "colorado_temperature")

# Midwest daily 8-hour ozone, summer 1987: one row per station, one column per day
data(ozone2)
days <- format(as.Date(ozone2$dates, format = "%y%m%d"), "%Y-%m-%d")
stopifnot(!anyNA(days), identical(rownames(ozone2$y), ozone2$dates))
oz <- data.frame(station = ozone2$station.id, lon = ozone2$lon.lat[, 1],
                 lat = ozone2$lon.lat[, 2])
oz <- cbind(oz, setNames(as.data.frame(t(unname(ozone2$y))), days))
write_dataset(oz, "ozone2")

# Rocky Mountain precipitation, August 1997 (RMprecip lives in the fields namespace)
rm <- fields::RMprecip
write_dataset(data.frame(
  station = rownames(rm$x),
  lon = rm$x$lon,
  lat = rm$x$lat,
  elevation = rm$elev,
  precipitation = rm$y
), "rm_precip")

# Simulated global CO2: noisy observations and the true field at the same cells
data(CO2)
grid <- expand.grid(lon = CO2.true$x, lat = CO2.true$y)[c(CO2.true$mask), ]
stopifnot(identical(unname(as.matrix(grid)), unname(CO2$lon.lat)))
write_dataset(data.frame(
  lon = CO2$lon.lat[, 1],
  lat = CO2$lon.lat[, 2],
  co2 = CO2$y,
  co2_true = CO2.true$z[CO2.true$mask]
), "co2")
