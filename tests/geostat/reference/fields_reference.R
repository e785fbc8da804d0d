# Maximum-likelihood reference values from the R package fields, for geostat's tests.
#
# Run from the repository root (about 15 minutes with OpenBLAS on 2 cores):
#
#     Rscript tests/geostat/reference/fields_reference.R
#
# It writes tests/geostat/reference/fields_reference.json.  The committed JSON
# was produced with R 4.2.2 (Debian bookworm r-base-core 4.2.2.20221110-2),
# fields 14.1 (r-cran-fields 14.1-1), spam 2.9-1, jsonlite 1.8.4 and OpenBLAS
# 0.3.21 (libopenblas0-pthread).  An independent NumPy/SciPy recomputation of
# every log-likelihood in the JSON (chordal distances, scipy.special.kv) agreed
# to within 1e-9 in absolute value (relative 4e-12).
#
# Model (fields' conventions): y = X beta + e, e ~ N(0, C) with
#     C = sigma2 * Matern(d / aRange, smoothness) + tau2 * I,
#     Matern(t, nu) = 2^(1 - nu) / Gamma(nu) * t^nu * K_nu(t)   (fields::Matern),
# lambda = tau2 / sigma2, beta by GLS, sigma2 profiled: sigma2 = r' K_l^-1 r / n
# with K_l = Matern(D / aRange) + lambda I and r = y - X beta.  The criterion is
# fields' lnProfileLike.FULL, the full Gaussian log-likelihood
#     -1/2 r' C^-1 r - 1/2 log det C - n/2 log(2 pi)
# at sigma2 = its profile value (then r' C^-1 r = n).
# Distances are chordal, in km: lon/lat (degrees) are mapped to 3-D
#     x = R cos(lat) cos(lon), y = R cos(lat) sin(lon), z = R sin(lat), R = 6371
# and fields' default Euclidean distance (rdist) is used on (x, y, z).
# The trend is a constant (mKrig m = 1) plus the covariates passed as Z.
#
# Each case is fitted with fields::spatialProcess (grid search + BFGS, whose
# default tolerance is loose, reltol = 1e-4), then polished by maximizing
# fields::mKrig's criterion over (log lambda, log aRange) with Nelder-Mead and
# BFGS from several starts; the best point is kept and checked by a central
# finite-difference gradient.  "at_fixed" records fields::mKrig at given
# (aRange, lambda).  The likelihood at the MLE is also recomputed directly
# from a dense Cholesky factorization to check lnProfileLike.FULL.
#
# JSON: a list of records, one per case, with
#   case, dataset, n, y {column, transform ("log" or null)}, coords
#   ("chordal_xyz_km"), earth_radius_km, smoothness, trend {description,
#   covariates (columns of the dataset, in beta order after the intercept)},
#   reml, criterion (the criterion maximized);
#   the estimate: loglik (lnProfileLike.FULL), variance (sigma2), range
#   (aRange, km), nugget (tau2 = lambda * sigma2), lambda, beta (intercept,
#   covariates...), fields_reml (lnProfileREML.FULL), textbook_reml (see
#   textbook_reml() below);
#   check {direct_loglik, direct_minus_fields, direct_beta, gradient, the
#   spatialProcess result before polishing, the polished optimum per start};
#   at_fixed: list of {range, lambda, smoothness, variance (profiled sigma2),
#   nugget (lambda * variance), loglik, fields_reml, textbook_reml, beta};
#   software; and for the REML case reml_definition, variance_reml_n_minus_p
#   and textbook_reml_fit (the maximizer of textbook_reml).

suppressPackageStartupMessages({
  library(fields)
  library(jsonlite)
})

out_file <- "tests/geostat/reference/fields_reference.json"
data_dir <- "datasets"
stopifnot(dir.exists(data_dir), dir.exists(dirname(out_file)))

EARTH_RADIUS_KM <- 6371
versions <- sprintf("R %s.%s, fields %s, spam %s, %s", R.version$major, R.version$minor,
                    packageVersion("fields"), packageVersion("spam"),
                    basename(La_library()))

chordal_xyz <- function(lon, lat) {
  lon <- lon * pi / 180
  lat <- lat * pi / 180
  EARTH_RADIUS_KM * cbind(cos(lat) * cos(lon), cos(lat) * sin(lon), sin(lat))
}

# fields::mKrig at fixed (aRange, lambda); returns its object.
fit_fixed <- function(case, aRange, lambda) {
  mKrig(case$x, case$y, Z = case$Z, m = 1, cov.function = "stationary.cov",
        cov.args = list(Covariance = "Matern", smoothness = case$smoothness),
        aRange = aRange, lambda = lambda, find.trA = FALSE)
}

criterion_name <- function(reml) if (reml) "lnProfileREML.FULL" else "lnProfileLike.FULL"

# Objective for optim: fields' criterion as a function of log(lambda), log(aRange).
objective <- function(case) {
  function(p) {
    value <- tryCatch(fit_fixed(case, exp(p[2]), exp(p[1]))$summary[[criterion_name(case$reml)]],
                      error = function(e) -Inf)
    if (is.finite(value)) value else -1e300
  }
}

polish <- function(case, start) {
  f <- objective(case)
  nm <- optim(start, f, method = "Nelder-Mead",
              control = list(fnscale = -1, reltol = 1e-13, maxit = 1000))
  bfgs <- optim(nm$par, f, method = "BFGS",
                control = list(fnscale = -1, reltol = 1e-15, ndeps = c(1e-5, 1e-5), maxit = 200))
  if (bfgs$value > nm$value) bfgs else nm
}

# Central finite-difference gradient of the criterion in (log lambda, log aRange).
gradient <- function(case, p, h = 1e-4) {
  f <- objective(case)
  sapply(1:2, function(i) {
    e <- c(0, 0)
    e[i] <- h
    (f(p + e) - f(p - e)) / (2 * h)
  })
}

# Direct dense computation of the full Gaussian log-likelihood (not using mKrig).
direct_loglik <- function(case, sigma2, aRange, tau2) {
  D <- rdist(case$x)
  t <- D / aRange
  nu <- case$smoothness
  K <- ifelse(t > 0, 2^(1 - nu) / gamma(nu) * t^nu * besselK(t, nu), 1)
  C <- sigma2 * K + diag(tau2, nrow(K))
  L <- chol(C)
  X <- cbind(rep(1, nrow(C)), case$Z)
  Ci <- function(b) backsolve(L, forwardsolve(t(L), b))
  beta <- solve(crossprod(X, Ci(X)), crossprod(X, Ci(case$y)))
  r <- case$y - X %*% beta
  n <- length(case$y)
  c(loglik = -0.5 * sum(r * Ci(r)) - sum(log(diag(L))) - n / 2 * log(2 * pi),
    beta = c(beta))
}

# Textbook restricted log-likelihood (Patterson-Thompson / Harville), sigma2
# profiled as q / (n - p):  -(n-p)/2 (log(2 pi) + 1 + log(q / (n-p)))
#   - 1/2 log det K_l - 1/2 log det(X' K_l^-1 X)   (no + 1/2 log det(X'X) term).
textbook_reml <- function(fit) {
  n <- fit$np
  p <- fit$nt
  q <- fit$quad.form
  -(n - p) / 2 * (log(2 * pi) + 1 + log(q / (n - p))) - fit$lnDetCov / 2 + fit$lnDetOmega / 2
}

summarise_fixed <- function(case, aRange, lambda) {
  fit <- fit_fixed(case, aRange, lambda)
  s <- fit$summary
  list(range = aRange, lambda = lambda, smoothness = case$smoothness,
       variance = s[["sigma2"]], nugget = lambda * s[["sigma2"]],
       loglik = s[["lnProfileLike.FULL"]], fields_reml = s[["lnProfileREML.FULL"]],
       textbook_reml = textbook_reml(fit), beta = as.list(c(fit$beta)))
}

run_case <- function(case) {
  message("case ", case$case, ": ", case$dataset, ", smoothness ", case$smoothness,
          if (case$reml) ", REML" else "")
  crit <- criterion_name(case$reml)
  sp <- spatialProcess(case$x, case$y, Z = case$Z, mKrig.args = list(m = 1),
                       cov.args = list(Covariance = "Matern", smoothness = case$smoothness),
                       REML = case$reml)
  sp_par <- log(c(sp$MLESummary[["lambda"]], sp$MLESummary[["aRange"]]))
  sp_value <- sp$MLESummary[[crit]]
  starts <- list(sp_par, sp_par + c(log(10), log(0.3)), sp_par + c(log(0.1), log(3)))
  runs <- lapply(starts, function(s) polish(case, s))
  values <- sapply(runs, function(r) r$value)
  best <- runs[[which.max(values)]]
  lambda <- exp(best$par[1])
  aRange <- exp(best$par[2])
  fit <- fit_fixed(case, aRange, lambda)
  s <- fit$summary
  grad <- gradient(case, best$par)
  direct <- direct_loglik(case, s[["sigma2"]], aRange, lambda * s[["sigma2"]])
  message(sprintf("  spatialProcess %s = %.12g; polished %.12g (starts: %s); |grad| = %.2g",
                  crit, sp_value, s[[crit]], paste(sprintf("%.12g", values), collapse = ", "),
                  max(abs(grad))))
  message(sprintf("  lnProfileLike.FULL %.15g, direct %.15g, difference %.2g",
                  s[["lnProfileLike.FULL"]], direct[["loglik"]],
                  s[["lnProfileLike.FULL"]] - direct[["loglik"]]))
  near <- c(signif(aRange, 2), signif(lambda, 2))
  fixed <- list(summarise_fixed(case, near[1], near[2]),
                summarise_fixed(case, signif(aRange / 2, 2), signif(lambda * 4, 2)),
                summarise_fixed(case, signif(aRange * 3, 2), signif(lambda / 10, 2)))
  record <- list(
    case = case$case, dataset = case$dataset, n = length(case$y),
    y = case$y_desc, coords = "chordal_xyz_km", earth_radius_km = EARTH_RADIUS_KM,
    smoothness = case$smoothness,
    trend = list(description = case$trend_desc, covariates = case$covariates),
    reml = case$reml, criterion = paste0("fields ", crit),
    loglik = s[["lnProfileLike.FULL"]], variance = s[["sigma2"]], range = aRange,
    nugget = lambda * s[["sigma2"]], lambda = lambda, beta = as.list(c(fit$beta)),
    fields_reml = s[["lnProfileREML.FULL"]], textbook_reml = textbook_reml(fit),
    check = list(
      direct_loglik = direct[["loglik"]],
      direct_minus_fields = s[["lnProfileLike.FULL"]] - direct[["loglik"]],
      direct_beta = as.list(unname(direct[-1])),
      gradient_log_lambda_log_range = grad,
      spatialProcess_criterion = sp_value,
      spatialProcess_range = sp$MLESummary[["aRange"]],
      spatialProcess_lambda = sp$MLESummary[["lambda"]],
      polished_criterion_by_start = values,
      polished_range_by_start = sapply(runs, function(r) exp(r$par[2])),
      polished_lambda_by_start = sapply(runs, function(r) exp(r$par[1]))),
    at_fixed = fixed,
    software = versions)
  if (case$reml) {
    record$reml_definition <- paste(
      "fields lnProfileREML.FULL = lnProfileLike.FULL + 1/2 lnDetOmega, where",
      "lnDetOmega = -log det(X' K_l^-1 X), K_l = Matern(D/aRange) + lambda I (unit variance),",
      "and sigma2 is still profiled as q/n (q = r' K_l^-1 r, n = number of data).",
      "So it equals -n/2 (1 + log(2 pi) + log(q/n)) - 1/2 log det K_l - 1/2 log det(X' K_l^-1 X).",
      "This is not the textbook REML, whose profile uses sigma2 = q/(n-p) and the factor (n-p):",
      "-(n-p)/2 (1 + log(2 pi) + log(q/(n-p))) - 1/2 log det K_l - 1/2 log det(X' K_l^-1 X)",
      "(reported as textbook_reml). Here 'loglik' is lnProfileLike.FULL at the fields-REML",
      "estimates and 'variance' is fields' sigma2 = q/n.")
    record$variance_reml_n_minus_p <- fit$quad.form / (fit$np - fit$nt)
    # Maximize the textbook REML too, starting from the fields-REML optimum.
    f <- function(p) {
      value <- tryCatch(textbook_reml(fit_fixed(case, exp(p[2]), exp(p[1]))),
                        error = function(e) -Inf)
      if (is.finite(value)) value else -1e300
    }
    nm <- optim(best$par, f, method = "Nelder-Mead",
                control = list(fnscale = -1, reltol = 1e-13, maxit = 1000))
    tb <- optim(nm$par, f, method = "BFGS",
                control = list(fnscale = -1, reltol = 1e-15, ndeps = c(1e-5, 1e-5), maxit = 200))
    if (nm$value > tb$value) tb <- nm
    tfit <- fit_fixed(case, exp(tb$par[2]), exp(tb$par[1]))
    sigma2 <- tfit$quad.form / (tfit$np - tfit$nt)
    record$textbook_reml_fit <- list(
      criterion = textbook_reml(tfit), range = exp(tb$par[2]), lambda = exp(tb$par[1]),
      variance = sigma2, nugget = exp(tb$par[1]) * sigma2, beta = as.list(c(tfit$beta)),
      loglik = tfit$summary[["lnProfileLike.FULL"]])
    message(sprintf("  textbook REML %.12g at aRange %.6g, lambda %.6g",
                    record$textbook_reml_fit$criterion, record$textbook_reml_fit$range,
                    record$textbook_reml_fit$lambda))
  }
  record
}

read_dataset <- function(name) {
  path <- file.path(data_dir, paste0(name, ".csv"))
  header <- names(read.csv(path, nrows = 1, check.names = FALSE))
  text <- intersect(c("station", "type"), header)
  read.csv(path, colClasses = setNames(rep("character", length(text)), text))
}

nar <- read_dataset("north_american_rainfall")
col <- read_dataset("colorado_temperature")
rmp <- read_dataset("rm_precip")
nar_x <- chordal_xyz(nar$lon, nar$lat)
log_precip <- list(column = "precipitation", transform = "log")

cases <- list(
  list(case = 1, dataset = "north_american_rainfall", x = nar_x, y = log(nar$precipitation),
       y_desc = log_precip, Z = NULL, covariates = list(), smoothness = 1.0, reml = FALSE,
       trend_desc = "constant"),
  list(case = 2, dataset = "north_american_rainfall", x = nar_x, y = log(nar$precipitation),
       y_desc = log_precip, Z = cbind(nar$lon, nar$lat), covariates = c("lon", "lat"),
       smoothness = 0.5, reml = FALSE,
       trend_desc = "constant + lon + lat (degrees, via fields Z)"),
  list(case = 3, dataset = "north_american_rainfall", x = nar_x, y = log(nar$precipitation),
       y_desc = log_precip, Z = cbind(nar$elevation), covariates = list("elevation"),
       smoothness = 1.5, reml = FALSE, trend_desc = "constant + elevation (m, via fields Z)"),
  list(case = 4, dataset = "colorado_temperature", x = chordal_xyz(col$lon, col$lat),
       y = col$tmax_mam, y_desc = list(column = "tmax_mam", transform = NA),
       Z = cbind(col$elevation), covariates = list("elevation"), smoothness = 1.0,
       reml = FALSE, trend_desc = "constant + elevation (m, via fields Z)"),
  list(case = 5, dataset = "rm_precip", x = chordal_xyz(rmp$lon, rmp$lat),
       y = rmp$precipitation, y_desc = list(column = "precipitation", transform = NA),
       Z = NULL, covariates = list(), smoothness = 1.0, reml = FALSE, trend_desc = "constant"),
  list(case = 6, dataset = "north_american_rainfall", x = nar_x, y = log(nar$precipitation),
       y_desc = log_precip, Z = NULL, covariates = list(), smoothness = 1.0, reml = TRUE,
       trend_desc = "constant")
)

only <- as.integer(Sys.getenv("FIELDS_REFERENCE_CASES", "0"))  # debugging aid
if (!all(only == 0)) cases <- cases[sapply(cases, function(k) k$case %in% only)]
records <- lapply(cases, run_case)
writeLines(toJSON(records, auto_unbox = TRUE, digits = NA, pretty = TRUE, na = "null"), out_file)
message("wrote ", out_file)
